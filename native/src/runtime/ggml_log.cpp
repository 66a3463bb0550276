#include "kazeia/ggml_log.h"

#include <cstdio>
#include <mutex>

#include "ggml.h"

namespace kazeia {
namespace {

thread_local std::string * t_capture = nullptr;

void on_log(ggml_log_level level, const char * text, void *) {
    if (t_capture) {
        if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_CONT) {
            if (t_capture->size() < 4096) *t_capture += text;
        }
        return;
    }
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
        std::fputs(text, stderr);
    }
}

}  // namespace

void ggml_log_install() {
    static std::once_flag once;
    std::call_once(once, [] { ggml_log_set(on_log, nullptr); });
}

ggml_log_capture::ggml_log_capture() {
    ggml_log_install();
    t_capture = new std::string();
}

ggml_log_capture::~ggml_log_capture() {
    delete t_capture;
    t_capture = nullptr;
}

std::string ggml_log_capture::reason() const {
    std::string s = t_capture ? *t_capture : std::string();
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    for (auto & c : s) if (c == '\n') c = ' ';
    return s.empty() ? s : ": " + s;
}

}  // namespace kazeia

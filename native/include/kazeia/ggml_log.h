// ggml reports problems (e.g. a malformed GGUF header) through its log callback; this
// collects them while a capture is alive so that exceptions can carry the reason.
#pragma once

#include <string>

namespace kazeia {

// Installs Kazeia's ggml log handler (idempotent): warnings and errors go to stderr,
// info and debug chatter is dropped.
void ggml_log_install();

class ggml_log_capture {
public:
    ggml_log_capture();
    ~ggml_log_capture();
    ggml_log_capture(const ggml_log_capture &) = delete;
    ggml_log_capture & operator=(const ggml_log_capture &) = delete;
    // ": <captured messages>" or "" when nothing was logged
    std::string reason() const;
};

}  // namespace kazeia

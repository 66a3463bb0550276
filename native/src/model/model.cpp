#include "kazeia/model.h"

#include <sys/mman.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"
#include "kazeia/errors.h"
#include "kazeia/ggml_log.h"

namespace kazeia {
namespace {

bool is_int_type(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64:
            return true;
        default:
            return false;
    }
}

int64_t int_at(gguf_type t, const void * p) {
    switch (t) {
        case GGUF_TYPE_UINT8: return *static_cast<const uint8_t *>(p);
        case GGUF_TYPE_INT8: return *static_cast<const int8_t *>(p);
        case GGUF_TYPE_UINT16: return *static_cast<const uint16_t *>(p);
        case GGUF_TYPE_INT16: return *static_cast<const int16_t *>(p);
        case GGUF_TYPE_UINT32: return *static_cast<const uint32_t *>(p);
        case GGUF_TYPE_INT32: return *static_cast<const int32_t *>(p);
        case GGUF_TYPE_UINT64: return int64_t(*static_cast<const uint64_t *>(p));
        case GGUF_TYPE_INT64: return *static_cast<const int64_t *>(p);
        default: return 0;
    }
}

size_t int_size(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: return 1;
        case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: return 4;
        default: return 8;
    }
}

// Typed access to GGUF metadata that checks types first (gguf_get_val_* abort on a mismatch).
class gguf_kv_reader final : public kv_reader {
public:
    explicit gguf_kv_reader(const gguf_context * ctx) : ctx_(ctx) {}

    bool has(const std::string & key) const override { return gguf_find_key(ctx_, key.c_str()) >= 0; }

    int64_t get_int(const std::string & key) const override {
        const int64_t id = find(key);
        const gguf_type t = gguf_get_kv_type(ctx_, id);
        if (!is_int_type(t)) throw type_error(key, "an integer", t);
        return int_at(t, gguf_get_val_data(ctx_, id));
    }

    double get_float(const std::string & key) const override {
        const int64_t id = find(key);
        const gguf_type t = gguf_get_kv_type(ctx_, id);
        if (t == GGUF_TYPE_FLOAT32) return gguf_get_val_f32(ctx_, id);
        if (t == GGUF_TYPE_FLOAT64) return gguf_get_val_f64(ctx_, id);
        if (is_int_type(t)) return double(int_at(t, gguf_get_val_data(ctx_, id)));
        throw type_error(key, "a number", t);
    }

    bool get_bool(const std::string & key) const override {
        const int64_t id = find(key);
        const gguf_type t = gguf_get_kv_type(ctx_, id);
        if (t != GGUF_TYPE_BOOL) throw type_error(key, "a boolean", t);
        return gguf_get_val_bool(ctx_, id);
    }

    std::string get_str(const std::string & key) const override {
        const int64_t id = find(key);
        const gguf_type t = gguf_get_kv_type(ctx_, id);
        if (t != GGUF_TYPE_STRING) throw type_error(key, "a string", t);
        return gguf_get_val_str(ctx_, id);
    }

    std::vector<int64_t> get_int_array(const std::string & key) const override {
        const int64_t id = find_array(key);
        const gguf_type t = gguf_get_arr_type(ctx_, id);
        if (!is_int_type(t)) throw type_error(key, "an integer array", t);
        const size_t n = gguf_get_arr_n(ctx_, id);
        const auto * data = static_cast<const uint8_t *>(gguf_get_arr_data(ctx_, id));
        std::vector<int64_t> out(n);
        for (size_t i = 0; i < n; ++i) out[i] = int_at(t, data + i * int_size(t));
        return out;
    }

    std::vector<std::string> get_str_array(const std::string & key) const override {
        const int64_t id = find_array(key);
        const gguf_type t = gguf_get_arr_type(ctx_, id);
        if (t != GGUF_TYPE_STRING) throw type_error(key, "a string array", t);
        const size_t n = gguf_get_arr_n(ctx_, id);
        std::vector<std::string> out(n);
        for (size_t i = 0; i < n; ++i) out[i] = gguf_get_arr_str(ctx_, id, i);
        return out;
    }

private:
    int64_t find(const std::string & key) const {
        const int64_t id = gguf_find_key(ctx_, key.c_str());
        if (id < 0) throw model_error("missing metadata key " + key);
        return id;
    }
    int64_t find_array(const std::string & key) const {
        const int64_t id = find(key);
        if (gguf_get_kv_type(ctx_, id) != GGUF_TYPE_ARRAY) {
            throw type_error(key, "an array", gguf_get_kv_type(ctx_, id));
        }
        return id;
    }
    static model_error type_error(const std::string & key, const char * want, gguf_type got) {
        return model_error("metadata key " + key + " should be " + want + " but is " + gguf_type_name(got));
    }
    const gguf_context * ctx_;
};

bool is_valid_utf8(const char * s) {
    const auto * p = reinterpret_cast<const unsigned char *>(s);
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p >> 5) == 0x6 ? 1 : (*p >> 4) == 0xe ? 2 : (*p >> 3) == 0x1e ? 3 : -1;
        if (n < 0) return false;
        for (++p; n > 0; --n, ++p) {
            if ((*p & 0xc0) != 0x80) return false;
        }
    }
    return true;
}

// Damaged files can carry names and strings that are not UTF-8; reject them here so Python
// never meets undecodable text.
void check_utf8(const gguf_context * ctx) {
    for (int64_t i = 0; i < gguf_get_n_kv(ctx); ++i) {
        const char * key = gguf_get_key(ctx, i);
        if (!is_valid_utf8(key)) throw model_error("metadata key #" + std::to_string(i) + " is not valid UTF-8");
        const gguf_type t = gguf_get_kv_type(ctx, i);
        if (t == GGUF_TYPE_STRING && !is_valid_utf8(gguf_get_val_str(ctx, i))) {
            throw model_error(std::string("metadata ") + key + " is not valid UTF-8");
        }
        if (t == GGUF_TYPE_ARRAY && gguf_get_arr_type(ctx, i) == GGUF_TYPE_STRING) {
            for (size_t j = 0; j < gguf_get_arr_n(ctx, i); ++j) {
                if (!is_valid_utf8(gguf_get_arr_str(ctx, i, j))) {
                    throw model_error(std::string("metadata ") + key + " holds text that is not valid UTF-8");
                }
            }
        }
    }
    for (int64_t i = 0; i < gguf_get_n_tensors(ctx); ++i) {
        if (!is_valid_utf8(gguf_get_tensor_name(ctx, i))) {
            throw model_error("tensor #" + std::to_string(i) + " has a name that is not valid UTF-8");
        }
    }
}

std::string shape_str(const std::vector<int64_t> & shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::vector<int64_t> torch_shape_of(const ggml_tensor * t) {
    const int n = ggml_n_dims(t);
    std::vector<int64_t> shape;
    for (int i = n - 1; i >= 0; --i) shape.push_back(t->ne[i]);
    return shape;
}

bool type_allowed(tensor_storage storage, ggml_type type) {
    switch (storage) {
        case tensor_storage::f32:
            return type == GGML_TYPE_F32;
        case tensor_storage::half_or_f32:
            return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
        case tensor_storage::quantizable:
            return type == GGML_TYPE_F32 || ggml_get_type_traits(type)->to_float != nullptr;
    }
    return false;
}

}  // namespace

std::unique_ptr<model> model::load(const std::string & path) {
    std::unique_ptr<model> m(new model());
    m->info_.path = path;
    try {
        m->open_gguf(path);
        m->bind_tensors();
        m->map_weights();
        m->summarise();
    } catch (const model_error & e) {
        throw model_error(path + ": " + e.what());
    } catch (const std::bad_alloc &) {
        throw model_error(path + ": out of memory while reading the file (corrupt sizes?)");
    } catch (const std::exception & e) {
        throw model_error(path + ": " + e.what());
    }
    return m;
}

model::~model() {
    if (weights_) ggml_backend_buffer_free(weights_);
    if (mapping_) munmap(mapping_, mapping_size_);
    if (meta_) ggml_free(meta_);
    if (gguf_) gguf_free(gguf_);
}

void model::open_gguf(const std::string & path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) throw model_error("file not found");
    if (!S_ISREG(st.st_mode)) throw model_error("not a regular file");
    info_.file_size = st.st_size;
    {
        char magic[4] = {};
        std::ifstream f(path, std::ios::binary);
        if (!f.read(magic, 4) || std::memcmp(magic, "GGUF", 4) != 0) {
            throw model_error("not a GGUF file (bad magic); convert a checkpoint with `kazeia convert`");
        }
    }
    ggml_log_capture capture;
    gguf_init_params params{/*no_alloc=*/true, &meta_};
    gguf_ = gguf_init_from_file(path.c_str(), params);
    if (!gguf_) {
        throw model_error("corrupt or truncated GGUF header" + capture.reason());
    }
    check_utf8(gguf_);
    gguf_kv_reader kv(gguf_);
    const std::string arch = kv.has("general.architecture") ? kv.get_str("general.architecture") : "";
    if (arch != k_architecture) {
        throw model_error("a GGUF file for architecture '" + arch + "', not a Kazeia Qwen3-TTS model ('" +
                          k_architecture + "')");
    }
    if (!kv.has("qwen3tts.format_version")) throw model_error("no qwen3tts.format_version: not written by Kazeia");
    const int64_t version = kv.get_int("qwen3tts.format_version");
    if (version != k_format_version) {
        throw model_error("format version " + std::to_string(version) + ", this build reads version " +
                          std::to_string(k_format_version) +
                          (version > k_format_version ? " (update Kazeia)" : " (re-convert the checkpoint)"));
    }
    info_.format_version = uint32_t(version);
    info_.name = kv.has("general.name") ? kv.get_str("general.name") : "";
    info_.description = kv.has("general.description") ? kv.get_str("general.description") : "";
    info_.random_weights = kv.has("qwen3tts.random_weights") && kv.get_bool("qwen3tts.random_weights");
    hparams_ = hparams_read(kv);
    specs_ = tensor_table_expand(hparams_);

    const auto lang_names = kv.get_str_array("qwen3tts.languages.names");
    const auto lang_ids = kv.get_int_array("qwen3tts.languages.ids");
    if (lang_names.size() != lang_ids.size()) throw model_error("language names and ids differ in length");
    for (size_t i = 0; i < lang_names.size(); ++i) info_.languages.push_back({lang_names[i], int32_t(lang_ids[i])});
    // Writers cannot store empty arrays: absent speaker tables mean no named speakers.
    const bool has_speakers = kv.has("qwen3tts.speakers.names");
    const auto spk_names = has_speakers ? kv.get_str_array("qwen3tts.speakers.names") : std::vector<std::string>{};
    const auto spk_ids = has_speakers ? kv.get_int_array("qwen3tts.speakers.ids") : std::vector<int64_t>{};
    const auto spk_dialects = has_speakers ? kv.get_str_array("qwen3tts.speakers.dialects") : std::vector<std::string>{};
    if (spk_names.size() != spk_ids.size() || spk_names.size() != spk_dialects.size()) {
        throw model_error("speaker names, ids and dialects differ in length");
    }
    for (size_t i = 0; i < spk_names.size(); ++i) {
        info_.speakers.push_back({spk_names[i], int32_t(spk_ids[i]), spk_dialects[i]});
    }
    const int64_t vocab = hparams_.talker.codec_vocab;
    for (const auto & s : info_.speakers) {
        if (s.codec_id < 0 || s.codec_id >= vocab) throw model_error("speaker " + s.name + " has an id outside the codec vocabulary");
    }
    for (const auto & l : info_.languages) {
        if (l.codec_id < 0 || l.codec_id >= vocab) throw model_error("language " + l.name + " has an id outside the codec vocabulary");
    }
}

void model::bind_tensors() {
    const size_t data_offset = gguf_get_data_offset(gguf_);
    const int64_t n = gguf_get_n_tensors(gguf_);
    std::map<std::string, const tensor_spec *> by_name;
    for (const auto & spec : specs_) by_name[spec.name] = &spec;
    for (int64_t i = 0; i < n; ++i) {
        const std::string name = gguf_get_tensor_name(gguf_, i);
        if (!by_name.count(name)) throw model_error("unexpected tensor " + name + " (not part of this model variant)");
        const size_t end = data_offset + gguf_get_tensor_offset(gguf_, i) + gguf_get_tensor_size(gguf_, i);
        if (end > size_t(info_.file_size)) {
            throw model_error("truncated: tensor " + name + " ends at byte " + std::to_string(end) +
                              " but the file has " + std::to_string(info_.file_size) + " bytes");
        }
    }
    for (const auto & spec : specs_) {
        ggml_tensor * t = ggml_get_tensor(meta_, spec.name.c_str());
        if (!t) throw model_error("missing tensor " + spec.name);
        const auto shape = torch_shape_of(t);
        int64_t want_ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
        const size_t n_dims = spec.shape.size();
        for (size_t d = 0; d < n_dims && d < GGML_MAX_DIMS; ++d) want_ne[d] = spec.shape[n_dims - 1 - d];
        if (!std::equal(want_ne, want_ne + GGML_MAX_DIMS, t->ne)) {
            throw model_error("tensor " + spec.name + " has shape " + shape_str(shape) + ", expected " +
                              shape_str(spec.shape));
        }
        if (!type_allowed(spec.storage, t->type)) {
            throw model_error("tensor " + spec.name + " is stored as " + ggml_type_name(t->type) +
                              ", which its role (" + tensor_storage_name(spec.storage) + ") does not allow");
        }
        tensors_[spec.name] = t;
    }
}

void model::map_weights() {
    const size_t data_offset = gguf_get_data_offset(gguf_);
    size_t data_size = 0, max_tensor = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(gguf_); ++i) {
        const size_t sz = gguf_get_tensor_size(gguf_, i);
        data_size = std::max(data_size, gguf_get_tensor_offset(gguf_, i) + sz);
        max_tensor = std::max(max_tensor, sz);
    }
    if (data_size == 0) throw model_error("the file holds no tensor data");

    mapping_size_ = size_t(info_.file_size);
    FILE * f = std::fopen(info_.path.c_str(), "rb");
    if (!f) throw model_error("cannot open for reading");
    mapping_ = mmap(nullptr, mapping_size_, PROT_READ, MAP_PRIVATE, fileno(f), 0);
    std::fclose(f);
    if (mapping_ == MAP_FAILED) {
        mapping_ = nullptr;
        throw model_error("cannot memory-map the file");
    }
    auto * base = static_cast<uint8_t *>(mapping_) + data_offset;

    // Zero-copy when the data section is aligned as the CPU backend requires; else copy.
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!cpu) throw model_error("ggml has no CPU device");
    // the CPU backend wraps host memory aligned to 32 bytes (TENSOR_ALIGNMENT)
    const bool aligned = (reinterpret_cast<uintptr_t>(base) % 32) == 0 && gguf_get_alignment(gguf_) % 32 == 0;
    if (aligned) weights_ = ggml_backend_dev_buffer_from_host_ptr(cpu, base, data_size, max_tensor);
    if (weights_) {
        for (int64_t i = 0; i < gguf_get_n_tensors(gguf_); ++i) {
            ggml_tensor * t = ggml_get_tensor(meta_, gguf_get_tensor_name(gguf_, i));
            if (ggml_backend_tensor_alloc(weights_, t, base + gguf_get_tensor_offset(gguf_, i)) != GGML_STATUS_SUCCESS) {
                throw model_error(std::string("cannot place tensor ") + t->name);
            }
        }
        ggml_backend_buffer_set_usage(weights_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        return;
    }
    weights_ = ggml_backend_alloc_ctx_tensors_from_buft(meta_, ggml_backend_dev_buffer_type(cpu));
    if (!weights_) throw model_error("cannot allocate memory for the weights");
    for (int64_t i = 0; i < gguf_get_n_tensors(gguf_); ++i) {
        ggml_tensor * t = ggml_get_tensor(meta_, gguf_get_tensor_name(gguf_, i));
        ggml_backend_tensor_set(t, base + gguf_get_tensor_offset(gguf_, i), 0, ggml_nbytes(t));
    }
    ggml_backend_buffer_set_usage(weights_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    munmap(mapping_, mapping_size_);
    mapping_ = nullptr;
}

void model::summarise() {
    for (const auto & spec : specs_) {
        const ggml_tensor * t = tensors_.at(spec.name);
        auto & s = info_.stages[tensor_stage_name(spec.stage)];
        s.n_tensors += 1;
        s.n_params += ggml_nelements(t);
        s.n_bytes += int64_t(ggml_nbytes(t));
        s.tensors_by_type[ggml_type_name(t->type)] += 1;
    }
}

void model::release_pages(const ggml_tensor * t) const {
    if (!mapping_ || !t || !t->data) return;
    const auto begin = reinterpret_cast<uintptr_t>(t->data);
    const auto end = begin + ggml_nbytes(t);
    const auto lo = reinterpret_cast<uintptr_t>(mapping_);
    if (begin < lo || end > lo + mapping_size_) return;
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t first = (begin + page - 1) / page * page;   // whole pages inside the tensor only
    const uintptr_t last = end / page * page;
    if (last > first) madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}

ggml_tensor * model::tensor(const std::string & name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : it->second;
}

ggml_tensor * model::require(const std::string & name, const std::string & network) const {
    ggml_tensor * t = tensor(name);
    if (!t) throw model_error(network + ": missing tensor " + name);
    return t;
}

std::vector<float> model::tensor_to_f32(const std::string & name) const {
    const ggml_tensor * t = require(name, "tensor_to_f32");
    std::vector<uint8_t> raw(ggml_nbytes(t));
    ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
    std::vector<float> out(ggml_nelements(t));
    if (t->type == GGML_TYPE_F32) {
        std::memcpy(out.data(), raw.data(), raw.size());
    } else {
        ggml_get_type_traits(t->type)->to_float(raw.data(), out.data(), ggml_nelements(t));
    }
    return out;
}

bool model::has_key(const std::string & key) const { return gguf_kv_reader(gguf_).has(key); }
std::string model::get_string(const std::string & key) const { return gguf_kv_reader(gguf_).get_str(key); }
std::vector<std::string> model::get_string_array(const std::string & key) const {
    return gguf_kv_reader(gguf_).get_str_array(key);
}
int64_t model::get_int(const std::string & key) const { return gguf_kv_reader(gguf_).get_int(key); }
double model::get_float(const std::string & key) const { return gguf_kv_reader(gguf_).get_float(key); }
bool model::get_bool(const std::string & key) const { return gguf_kv_reader(gguf_).get_bool(key); }

std::vector<std::string> model::keys() const {
    std::vector<std::string> out;
    for (int64_t i = 0; i < gguf_get_n_kv(gguf_); ++i) out.push_back(gguf_get_key(gguf_, i));
    return out;
}

}  // namespace kazeia

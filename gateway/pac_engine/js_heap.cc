#include "gateway/pac_engine/js_heap.h"

#include <cstdlib>
#include <cstring>

#include "gateway/base/log.h"

namespace h2gate::pac {
namespace {

// Each block carries its size in front, so frees and reallocs can be
// counted. 16 bytes keep the payload aligned for any type.
struct alignas(16) BlockHeader {
  std::size_t size;
};
static_assert(sizeof(BlockHeader) == 16);

constexpr std::size_t kMaxMessage = 300;

std::string clean(std::string_view s) {
  std::string out(s.substr(0, kMaxMessage));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  if (s.size() > kMaxMessage) out += "...";
  return out;
}

}  // namespace

JsHeap::JsHeap(std::size_t max_bytes, Clock clock, void* owner)
    : max_bytes_(max_bytes), clock_(std::move(clock)), owner_(owner) {
  ctx_ = duk_create_heap(&JsHeap::alloc, &JsHeap::realloc, &JsHeap::free, this, &JsHeap::fatal);
}

JsHeap::~JsHeap() {
  // Destroying the heap runs the script's finalizers; a cancelled heap
  // stops any JavaScript at its first interrupt, so a finalizer that loops
  // cannot hold the thread.
  cancelled_.store(true, std::memory_order_relaxed);
  if (ctx_ != nullptr) duk_destroy_heap(ctx_);
}

void JsHeap::setDeadline(Deadline deadline) {
  deadline_ = deadline;
  timed_out_ = false;
  refused_ = false;
}

bool JsHeap::checkTimeout() {
  if (cancelled_.load(std::memory_order_relaxed)) {
    timed_out_ = true;
    return true;
  }
  if (deadline_ != Deadline::max() && std::chrono::steady_clock::now() >= deadline_) {
    timed_out_ = true;
    return true;
  }
  return false;
}

double JsHeap::now() const {
  if (clock_) return clock_();
  using namespace std::chrono;
  return static_cast<double>(
      duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

void* JsHeap::ownerOf(duk_context* ctx) {
  duk_memory_functions funcs{};
  duk_get_memory_functions(ctx, &funcs);
  return static_cast<JsHeap*>(funcs.udata)->owner_;
}

void* JsHeap::alloc(void* udata, duk_size_t size) {
  auto* self = static_cast<JsHeap*>(udata);
  if (size > self->max_bytes_ || self->used_ + size > self->max_bytes_) {
    self->refused_ = true;
    return nullptr;
  }
  auto* block = static_cast<BlockHeader*>(std::malloc(sizeof(BlockHeader) + size));
  if (block == nullptr) {
    self->refused_ = true;
    return nullptr;
  }
  block->size = size;
  self->used_ += size;
  if (self->used_ > self->peak_) self->peak_ = self->used_;
  return block + 1;
}

void* JsHeap::realloc(void* udata, void* ptr, duk_size_t size) {
  if (ptr == nullptr) return alloc(udata, size);
  auto* self = static_cast<JsHeap*>(udata);
  BlockHeader* block = static_cast<BlockHeader*>(ptr) - 1;
  if (size == 0) {
    free(udata, ptr);
    return nullptr;
  }
  const std::size_t old = block->size;
  if (size > old && (size > self->max_bytes_ || self->used_ - old + size > self->max_bytes_)) {
    self->refused_ = true;
    return nullptr;  // the old block stays valid, as realloc() promises
  }
  auto* grown = static_cast<BlockHeader*>(std::realloc(block, sizeof(BlockHeader) + size));
  if (grown == nullptr) {
    self->refused_ = true;
    return nullptr;
  }
  grown->size = size;
  self->used_ = self->used_ - old + size;
  if (self->used_ > self->peak_) self->peak_ = self->used_;
  return grown + 1;
}

void JsHeap::free(void* udata, void* ptr) {
  if (ptr == nullptr) return;
  auto* self = static_cast<JsHeap*>(udata);
  BlockHeader* block = static_cast<BlockHeader*>(ptr) - 1;
  self->used_ -= block->size;
  std::free(block);
}

void JsHeap::fatal(void*, const char* msg) {
  // Only reached for an error outside every protected call, which this code
  // never makes: the heap's state is undefined, so is ours.
  H2G_LOG(Error, 0, 0, "pac: JavaScript engine fatal error: " << (msg ? msg : "(no message)"));
  std::abort();
}

namespace {

// Runs inside duk_safe_call with the thrown value at index 0: reading its
// properties or converting it may run script code (getters, toString), which
// may throw again.
duk_ret_t describeError(duk_context* ctx, void* udata) {
  auto* text = static_cast<std::string*>(udata);
  if (duk_is_error(ctx, 0)) {
    duk_get_prop_string(ctx, 0, "lineNumber");
    const bool has_line = duk_is_number(ctx, -1);
    const long line = has_line ? static_cast<long>(duk_get_number(ctx, -1)) : 0;
    duk_pop(ctx);
    *text = duk_safe_to_string(ctx, 0);
    // The line where it was thrown (compile errors already name it).
    if (has_line && text->find("(line ") == std::string::npos)
      *text += " (line " + std::to_string(line) + ")";
  } else {
    *text = std::string("uncaught value: ") + duk_safe_to_string(ctx, 0);
  }
  return 0;
}

struct Program {
  std::string_view source;
  const char* filename;
  bool compiled = false;
};

duk_ret_t compileAndRun(duk_context* ctx, void* udata) {
  auto* p = static_cast<Program*>(udata);
  duk_push_string(ctx, p->filename);
  duk_compile_lstring_filename(ctx, 0, p->source.data(), p->source.size());
  p->compiled = true;
  duk_call(ctx, 0);
  return 0;
}

}  // namespace

bool JsHeap::limitStruck(PacError& err) const {
  if (timed_out_) {
    err.kind = PacError::Kind::Timeout;
    err.message = "ran past its time limit";
    return true;
  }
  if (refused_) {
    err.kind = PacError::Kind::Memory;
    err.message = "reached its memory limit of " + std::to_string(max_bytes_ / 1024) + " KiB";
    return true;
  }
  return false;
}

PacError JsHeap::popError(PacError::Kind kind) {
  PacError err;
  if (!limitStruck(err)) {
    err.kind = kind;
    std::string text;
    if (duk_safe_call(ctx_, describeError, &text, 1, 1) != DUK_EXEC_SUCCESS && text.empty())
      text = "(an error that could not be described)";
    err.message = clean(text);
    // The timeout or the memory limit may have struck while describing it.
    limitStruck(err);
  }
  duk_pop(ctx_);  // the error, or describeError's result in its place
  return err;
}

PacError JsHeap::runProgram(std::string_view source, const char* filename) {
  Program p{source, filename};
  if (duk_safe_call(ctx_, compileAndRun, &p, 0, 1) != DUK_EXEC_SUCCESS)
    return popError(p.compiled ? PacError::Kind::Exception : PacError::Kind::Syntax);
  duk_pop(ctx_);
  return {};
}

}  // namespace h2gate::pac

extern "C" int h2gate_duk_exec_timeout_check(void* heap_udata) {
  return static_cast<h2gate::pac::JsHeap*>(heap_udata)->checkTimeout() ? 1 : 0;
}

extern "C" double h2gate_duk_date_now(void* ctx) {
  duk_memory_functions funcs{};
  duk_get_memory_functions(static_cast<duk_context*>(ctx), &funcs);
  return static_cast<h2gate::pac::JsHeap*>(funcs.udata)->now();
}

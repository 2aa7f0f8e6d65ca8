// Shared memory between the ranks of one host: a POSIX shared-memory object mapped as a
// SharedArrayBuffer (so Atomics and typed arrays work on it, and it can be posted to a
// worker thread), and futex wait/wake on its 32-bit words across processes. The wait runs
// on libuv's thread pool so the calling thread's event loop keeps running.
#include <node.h>
#include <uv.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <limits>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

#include "alias.h"
#include "exchange.h"
#include "pending-work.h"
#include "reduce.h"

using namespace v8;

namespace {

void ThrowError(Isolate* iso, const std::string& msg) {
  iso->ThrowException(Exception::Error(String::NewFromUtf8(iso, msg.c_str()).ToLocalChecked()));
}

// The 32-bit word at byteOffset of a SharedArrayBuffer argument, or null (and a pending exception).
int32_t* WordOf(const FunctionCallbackInfo<Value>& args, const char* what) {
  Isolate* iso = args.GetIsolate();
  if (!args[0]->IsSharedArrayBuffer() || !args[1]->IsUint32()) {
    ThrowError(iso, std::string(what) + ": expected (SharedArrayBuffer, byteOffset, ...)");
    return nullptr;
  }
  Local<SharedArrayBuffer> sab = args[0].As<SharedArrayBuffer>();
  uint32_t off = args[1].As<Uint32>()->Value();
  if (off % 4 != 0 || static_cast<size_t>(off) + 4 > sab->ByteLength()) {
    ThrowError(iso, std::string(what) + ": byteOffset " + std::to_string(off) + " is not an aligned word of the buffer");
    return nullptr;
  }
  return reinterpret_cast<int32_t*>(static_cast<char*>(sab->Data()) + off);
}

// map(name, bytes): creates (or opens) /dev/shm/<name>, reserves `bytes`, maps it shared.
void MapShared(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  if (!args[0]->IsString() || !args[1]->IsNumber()) return ThrowError(iso, "map(name, bytes)");
  String::Utf8Value name(iso, args[0]);
  double want = args[1].As<Number>()->Value();
  if (!(want >= 4096) || want > 1e12) return ThrowError(iso, "map: bytes must be between 4096 and 1e12");
  size_t bytes = static_cast<size_t>(want);
  int fd = shm_open(*name, O_RDWR | O_CREAT, 0600);
  if (fd < 0) return ThrowError(iso, std::string("shm_open ") + *name + ": " + strerror(errno));
  // reserve the pages now: a full /dev/shm fails here, not as a SIGBUS on first touch
  int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    return ThrowError(iso, std::string("reserving ") + std::to_string(bytes) + " bytes of /dev/shm for " + *name + ": " + strerror(err));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return ThrowError(iso, std::string("mmap ") + *name + ": " + strerror(errno));
  std::unique_ptr<BackingStore> store = SharedArrayBuffer::NewBackingStore(
      p, bytes, [](void* data, size_t length, void*) { munmap(data, length); }, nullptr);
  args.GetReturnValue().Set(SharedArrayBuffer::New(iso, std::shared_ptr<BackingStore>(std::move(store))));
}

// unlink(name): removes the name; mappings stay valid until unmapped.
void Unlink(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  if (!args[0]->IsString()) return ThrowError(iso, "unlink(name)");
  String::Utf8Value name(iso, args[0]);
  if (shm_unlink(*name) != 0 && errno != ENOENT) ThrowError(iso, std::string("shm_unlink ") + *name + ": " + strerror(errno));
}

// wake(sab, byteOffset): wakes every thread, in any process, waiting on the word.
void Wake(const FunctionCallbackInfo<Value>& args) {
  int32_t* word = WordOf(args, "wake");
  if (!word) return;
  long n = syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  args.GetReturnValue().Set(static_cast<double>(n < 0 ? 0 : n));
}

// Sleeps until the word is not `expected` or woken, at most timeoutMs; true when the time ran out.
bool FutexWait(int32_t* word, int32_t expected, double timeoutMs) {
  double ms = timeoutMs < 0 ? 0 : timeoutMs;
  time_t sec = static_cast<time_t>(ms / 1000);
  timespec ts{sec, static_cast<long>((ms - 1000.0 * static_cast<double>(sec)) * 1e6)};
  long r = syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
  return r != 0 && errno == ETIMEDOUT;
}

// waitSync(sab, byteOffset, expected, timeoutMs): as wait, but blocks the calling thread.
void WaitSync(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  int32_t* word = WordOf(args, "waitSync");
  if (!word) return;
  if (!args[2]->IsInt32() || !args[3]->IsNumber()) return ThrowError(iso, "waitSync(sab, byteOffset, expected, timeoutMs)");
  args.GetReturnValue().Set(FutexWait(word, args[2].As<Int32>()->Value(), args[3].As<Number>()->Value()));
}

// The elements of a typed array (SharedArrayBuffer-backed or not).
template <typename T>
T* ElementsOf(Local<Value> v) {
  Local<ArrayBufferView> view = v.As<ArrayBufferView>();
  return reinterpret_cast<T*>(static_cast<char*>(view->Buffer()->Data()) + view->ByteOffset());
}

// reduce(dst, src, op[, out]): dst ⊕= src, or out = dst ⊕ src (op 0 sum, 1 product, 2 max,
// 3 min); every array of one type and length.
void Reduce(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  Local<Value> d = args[0], s = args[1];
  Local<Value> o = args.Length() > 3 && !args[3]->IsUndefined() ? args[3] : d;
  bool f32 = d->IsFloat32Array() && s->IsFloat32Array() && o->IsFloat32Array();
  bool f64 = d->IsFloat64Array() && s->IsFloat64Array() && o->IsFloat64Array();
  bool i32 = d->IsInt32Array() && s->IsInt32Array() && o->IsInt32Array();
  if (!(f32 || f64 || i32) || !args[2]->IsUint32()) return ThrowError(iso, "reduce(dst, src, op[, out]): Float32Array, Float64Array or Int32Array of one type and an op code");
  size_t n = d.As<TypedArray>()->Length();
  uint32_t op = args[2].As<Uint32>()->Value();
  if (s.As<TypedArray>()->Length() != n || o.As<TypedArray>()->Length() != n || op > 3) return ThrowError(iso, "reduce: lengths differ or op code is not 0–3");
  if (f32) ReduceFloat(ElementsOf<float>(o), ElementsOf<float>(d), ElementsOf<float>(s), n, op);
  else if (f64) ReduceFloat(ElementsOf<double>(o), ElementsOf<double>(d), ElementsOf<double>(s), n, op);
  else ReduceInt32(ElementsOf<int32_t>(o), ElementsOf<int32_t>(d), ElementsOf<int32_t>(s), n, op);
}

// divide(values, divisor): a Float32Array or Float64Array divided in place; false when a
// quotient is ±Infinity (the caller's overflow fallback then looks at those elements).
void Divide(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  Local<Value> v = args[0];
  if (!(v->IsFloat32Array() || v->IsFloat64Array()) || !args[1]->IsNumber())
    return ThrowError(iso, "divide(values, divisor): a Float32Array or Float64Array and a number");
  size_t n = v.As<TypedArray>()->Length();
  double divisor = args[1].As<Number>()->Value();
  bool finite = v->IsFloat32Array() ? DivideFloat(ElementsOf<float>(v), n, static_cast<float>(divisor))
                                    : DivideFloat(ElementsOf<double>(v), n, divisor);
  args.GetReturnValue().Set(finite);
}

// copyStreaming(dst, src): dst.set(src) for typed arrays of one byte length, large copies with
// non-temporal stores: the destination is not read first (no read-for-ownership), which made
// the shared-memory all-reduce's copy in and out of a 4 MiB slot 1.3-2.3x faster on this
// project's 2-core host (a copy pattern of 64 MiB: 4.4 ms against 6.0-10.4 ms with memcpy).
// The fence makes the stores visible before whatever the caller publishes next.
void CopyStreaming(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  if (!args[0]->IsArrayBufferView() || !args[1]->IsArrayBufferView())
    return ThrowError(iso, "copyStreaming(dst, src): two typed arrays");
  Local<ArrayBufferView> dv = args[0].As<ArrayBufferView>(), sv = args[1].As<ArrayBufferView>();
  size_t n = sv->ByteLength();
  if (dv->ByteLength() != n) return ThrowError(iso, "copyStreaming: dst and src differ in byte length");
  char* d = ElementsOf<char>(dv);
  const char* src = ElementsOf<char>(sv);
  constexpr size_t kStreamFrom = 256 * 1024;
#ifdef __SSE2__
  bool apart = d + n <= src || src + n <= d;
  if (n >= kStreamFrom && apart) {
    size_t head = (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16;
    std::memcpy(d, src, head);
    size_t i = head;
    for (; i + 64 <= n; i += 64) {
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    std::memcpy(d + i, src + i, n - i);
    _mm_sfence();
    return;
  }
#endif
  std::memmove(d, src, n);
}

struct WaitJob {
  uv_work_t req;
  Isolate* iso;
  Global<Context> context;
  Global<Promise::Resolver> resolver;
  std::shared_ptr<BackingStore> keepAlive;  // the mapping outlives the wait
  PendingWork* pending;
  int32_t* word;
  int32_t expected;
  double timeoutMs;
  bool timedOut = false;
};

// wait(sab, byteOffset, expected, timeoutMs): resolves false when the word is not `expected`
// or was woken, true when the timeout passed.
void Wait(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  int32_t* word = WordOf(args, "wait");
  if (!word) return;
  if (!args[2]->IsInt32() || !args[3]->IsNumber()) return ThrowError(iso, "wait(sab, byteOffset, expected, timeoutMs)");
  Local<Context> ctx = iso->GetCurrentContext();
  Local<Promise::Resolver> resolver = Promise::Resolver::New(ctx).ToLocalChecked();
  auto* job = new WaitJob();
  job->req.data = job;
  job->iso = iso;
  job->context.Reset(iso, ctx);
  job->resolver.Reset(iso, resolver);
  job->keepAlive = args[0].As<SharedArrayBuffer>()->GetBackingStore();
  job->word = word;
  job->expected = args[2].As<Int32>()->Value();
  job->timeoutMs = args[3].As<Number>()->Value();
  job->pending = &PendingWork::Here(iso);
  job->pending->Begin(word);
  uv_queue_work(
      node::GetCurrentEventLoop(iso), &job->req,
      [](uv_work_t* req) {
        auto* j = static_cast<WaitJob*>(req->data);
        if (!j->pending->Closing()) j->timedOut = FutexWait(j->word, j->expected, j->timeoutMs);
      },
      [](uv_work_t* req, int) {
        std::unique_ptr<WaitJob> j(static_cast<WaitJob*>(req->data));
        int32_t* word = j->word;
        const bool timedOut = j->timedOut;
        SettleAndEnd(std::move(j), timedOut, word);
      });
  args.GetReturnValue().Set(resolver->GetPromise());
}

}  // namespace

NODE_MODULE_INIT(/* exports, module, context */) {
  Isolate* iso = context->GetIsolate();
  auto set = [&](const char* name, FunctionCallback fn) {
    exports->Set(context, String::NewFromUtf8(iso, name).ToLocalChecked(), FunctionTemplate::New(iso, fn)->GetFunction(context).ToLocalChecked()).Check();
  };
  set("map", MapShared);
  set("unlink", Unlink);
  set("wake", Wake);
  set("wait", Wait);
  set("waitSync", WaitSync);
  set("reduce", Reduce);
  set("divide", Divide);
  set("copyStreaming", CopyStreaming);
  RegisterAlias(exports, context);
  RegisterExchange(exports, context);
}

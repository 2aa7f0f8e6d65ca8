// Shared memory between the ranks of one host: a POSIX shared-memory object mapped as a
// SharedArrayBuffer (so Atomics and typed arrays work on it, and it can be posted to a
// worker thread), and futex wait/wake on its 32-bit words across processes. The wait runs
// on libuv's thread pool so the calling thread's event loop keeps running.
#include <node.h>
#include <uv.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

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

struct WaitJob {
  uv_work_t req;
  Isolate* iso;
  Global<Context> context;
  Global<Promise::Resolver> resolver;
  std::shared_ptr<BackingStore> keepAlive;  // the mapping outlives the wait
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
  uv_queue_work(
      node::GetCurrentEventLoop(iso), &job->req,
      [](uv_work_t* req) {
        auto* j = static_cast<WaitJob*>(req->data);
        double ms = j->timeoutMs < 0 ? 0 : j->timeoutMs;
        timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms - 1000.0 * static_cast<double>(static_cast<time_t>(ms / 1000))) * 1e6)};
        long r = syscall(SYS_futex, j->word, FUTEX_WAIT, j->expected, &ts, nullptr, 0);
        j->timedOut = r != 0 && errno == ETIMEDOUT;
      },
      [](uv_work_t* req, int) {
        std::unique_ptr<WaitJob> j(static_cast<WaitJob*>(req->data));
        HandleScope scope(j->iso);
        Local<Context> ctx = j->context.Get(j->iso);
        Context::Scope cs(ctx);
        j->resolver.Get(j->iso)->Resolve(ctx, Boolean::New(j->iso, j->timedOut)).Check();
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
}

// Shared views of memory V8 does not share: a SharedArrayBuffer over a range of an ordinary
// ArrayBuffer (the wasm heap), so another thread can read and write that memory in place,
// and a finite check over float32 arrays at memory speed (here or on the thread pool). Both
// serve DDP's gradients (DESIGN.md, "Where gradients live").
#include <node.h>
#include <uv.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "alias.h"
#include "pending-work.h"

using namespace v8;

namespace {

void Throw(Isolate* iso, const std::string& msg) {
  iso->ThrowException(Exception::Error(String::NewFromUtf8(iso, msg.c_str()).ToLocalChecked()));
}

// aliasShared(buffer): a SharedArrayBuffer over all of `buffer`'s current bytes. It holds the
// buffer's backing store, so the memory outlives the alias even when `buffer` is detached
// (a wasm memory grown in place detaches its old ArrayBuffer but keeps the same memory).
void AliasShared(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  if (!args[0]->IsArrayBuffer()) return Throw(iso, "aliasShared(buffer): expected an ArrayBuffer");
  std::shared_ptr<BackingStore> owner = args[0].As<ArrayBuffer>()->GetBackingStore();
  if (owner->Data() == nullptr || owner->ByteLength() == 0) return Throw(iso, "aliasShared: the buffer is empty or detached");
  auto* hold = new std::shared_ptr<BackingStore>(owner);
  std::unique_ptr<BackingStore> store = SharedArrayBuffer::NewBackingStore(
      owner->Data(), owner->ByteLength(),
      [](void*, size_t, void* held) { delete static_cast<std::shared_ptr<BackingStore>*>(held); }, hold);
  args.GetReturnValue().Set(SharedArrayBuffer::New(iso, std::shared_ptr<BackingStore>(std::move(store))));
}

// address(buffer): where an ArrayBuffer's or SharedArrayBuffer's bytes start (to see that a
// wasm memory grew in place), as a Number (exact below 2^53, which user-space addresses are).
void Address(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  std::shared_ptr<BackingStore> store;
  if (args[0]->IsArrayBuffer()) store = args[0].As<ArrayBuffer>()->GetBackingStore();
  else if (args[0]->IsSharedArrayBuffer()) store = args[0].As<SharedArrayBuffer>()->GetBackingStore();
  else return Throw(iso, "address(buffer): expected an ArrayBuffer or a SharedArrayBuffer");
  args.GetReturnValue().Set(static_cast<double>(reinterpret_cast<uintptr_t>(store->Data())));
}

// Whether no float32 is NaN or ±Inf. x − x is 0 for a finite x and NaN otherwise, and a NaN
// stays in the sum: no branch, so the compiler vectorises the loop.
bool Finite(const float* v, size_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) acc[k] += v[i + k] - v[i + k];
  float sum = 0;
  for (; i < n; i++) sum += v[i] - v[i];
  for (float a : acc) sum += a;
  return sum == 0;
}

const float* FloatsOf(Local<Float32Array> view) {
  return reinterpret_cast<const float*>(static_cast<char*>(view->Buffer()->Data()) + view->ByteOffset());
}

// allFinite(values): Finite on the calling thread.
void AllFinite(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  if (!args[0]->IsFloat32Array()) return Throw(iso, "allFinite(values): expected a Float32Array");
  Local<Float32Array> view = args[0].As<Float32Array>();
  args.GetReturnValue().Set(Finite(FloatsOf(view), view->Length()));
}

struct FiniteJob {
  uv_work_t req;
  Isolate* iso;
  Global<Context> context;
  Global<Promise::Resolver> resolver;
  std::shared_ptr<BackingStore> keepAlive;  // the memory outlives the check
  PendingWork* pending;
  const float* values;
  size_t n;
  bool finite = false;
};

// allFiniteAsync(values): Finite on libuv's thread pool (another core, while the caller's
// thread goes on); the caller must not write the values until the promise settles.
void AllFiniteAsync(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  if (!args[0]->IsFloat32Array()) return Throw(iso, "allFiniteAsync(values): expected a Float32Array");
  Local<Float32Array> view = args[0].As<Float32Array>();
  Local<Context> ctx = iso->GetCurrentContext();
  Local<Promise::Resolver> resolver = Promise::Resolver::New(ctx).ToLocalChecked();
  auto* job = new FiniteJob();
  job->req.data = job;
  job->iso = iso;
  job->context.Reset(iso, ctx);
  job->resolver.Reset(iso, resolver);
  job->keepAlive = view->Buffer()->GetBackingStore();
  job->values = FloatsOf(view);
  job->n = view->Length();
  job->pending = &PendingWork::Here(iso);
  job->pending->Begin();
  uv_queue_work(
      node::GetCurrentEventLoop(iso), &job->req,
      [](uv_work_t* req) {
        auto* j = static_cast<FiniteJob*>(req->data);
        j->finite = Finite(j->values, j->n);
      },
      [](uv_work_t* req, int) {
        std::unique_ptr<FiniteJob> j(static_cast<FiniteJob*>(req->data));
        const bool finite = j->finite;
        SettleAndEnd(std::move(j), finite);
      });
  args.GetReturnValue().Set(resolver->GetPromise());
}

}  // namespace

void RegisterAlias(Local<Object> exports, Local<Context> context) {
  Isolate* iso = context->GetIsolate();
  auto set = [&](const char* name, FunctionCallback fn) {
    exports->Set(context, String::NewFromUtf8(iso, name).ToLocalChecked(), FunctionTemplate::New(iso, fn)->GetFunction(context).ToLocalChecked()).Check();
  };
  set("aliasShared", AliasShared);
  set("address", Address);
  set("allFinite", AllFinite);
  set("allFiniteAsync", AllFiniteAsync);
}

// Work this addon queued on libuv's thread pool, per Node environment (the main thread or one
// worker thread). Node closes a terminated worker's event loop without waiting for an addon's
// uv_work_t, and aborts the whole process ("uv_loop_close() while having open handles") when
// one is still in flight; so each environment gets an async cleanup hook that holds its
// teardown until the work is back, waking the futex waits so that takes one wake-up, not a
// timeout. Everything here runs on the environment's own thread except `closing`'s reads.
#pragma once
#include <node.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>

class PendingWork {
 public:
  // The calling thread's registry, made (and its cleanup hook added) on first use.
  static PendingWork& Here(v8::Isolate* iso);

  // Around one uv_queue_work: Begin before, End in its after-work callback. `word`, when
  // given, is the futex word the work sleeps on (woken at teardown).
  void Begin(int32_t* word = nullptr);
  void End(int32_t* word = nullptr);
  // True once teardown began: the work should not sleep, and its after-work callback must not
  // call into JavaScript (the environment is going away; nobody can see the result).
  bool Closing() const { return closing_.load(std::memory_order_acquire); }

 private:
  static void Drain(void* self, void (*finish)(void*), void* finishArg);
  int inFlight_ = 0;
  std::unordered_map<int32_t*, int> waitWords_;
  std::atomic<bool> closing_{false};
  void (*finish_)(void*) = nullptr;
  void* finishArg_ = nullptr;
};

// An after-work callback's ending: resolves the job's promise with `value` unless teardown began,
// frees the job, and only then ends the work (at teardown that lets Node close the loop). A job
// has iso, context, resolver (its promise's) and pending; `word` is the futex word it slept on.
template <typename Job>
void SettleAndEnd(std::unique_ptr<Job> job, bool value, int32_t* word = nullptr) {
  PendingWork* pending = job->pending;
  if (!pending->Closing()) {
    v8::HandleScope scope(job->iso);
    v8::Local<v8::Context> ctx = job->context.Get(job->iso);
    v8::Context::Scope cs(ctx);
    job->resolver.Get(job->iso)->Resolve(ctx, v8::Boolean::New(job->iso, value)).Check();
  }
  job.reset();
  pending->End(word);
}

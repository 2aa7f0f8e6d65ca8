// See pending-work.h.
#include "pending-work.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

PendingWork& PendingWork::Here(v8::Isolate* iso) {
  // One environment per thread: Node runs each worker on a thread of its own.
  thread_local PendingWork* here = nullptr;
  if (!here) {
    here = new PendingWork();  // lives as long as the thread's environment: its hook refers to it
    node::AddEnvironmentCleanupHook(iso, Drain, here).release();  // kept registered for good
  }
  return *here;
}

void PendingWork::Begin(int32_t* word) {
  ++inFlight_;
  if (word) ++waitWords_[word];
}

void PendingWork::End(int32_t* word) {
  if (word && --waitWords_[word] == 0) waitWords_.erase(word);
  if (--inFlight_ == 0 && finish_) {
    void (*finish)(void*) = finish_;
    finish_ = nullptr;
    finish(finishArg_);
  }
}

void PendingWork::Drain(void* self, void (*finish)(void*), void* finishArg) {
  auto* p = static_cast<PendingWork*>(self);
  p->closing_.store(true, std::memory_order_release);
  // A wait that read `closing` just before this may still sleep out its timeout (comm's are
  // ≤ 50 ms). Waiters of other processes on these words wake too; their callers re-check and wait again.
  for (auto& entry : p->waitWords_) syscall(SYS_futex, entry.first, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  if (p->inFlight_ == 0) return finish(finishArg);
  p->finish_ = finish;
  p->finishArg_ = finishArg;
}

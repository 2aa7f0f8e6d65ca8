// oneDNN 2.6's JIT kernels (sgemm, convolutions) corrupt the process heap when a signal handler
// runs on their thread mid-call: dnnl_sgemm in a loop under a 5 kHz SIGPROF timer aborted in
// glibc's free ("corrupted size vs. prev_size") on every run, and never with the signals
// blocked; `node --cpu-prof` crashed ranks the same way. Profilers' SIGPROF, SIGCHLD, SIGWINCH
// and the like therefore wait until such a call is over. Faults stay deliverable.
#pragma once
#include <pthread.h>
#include <signal.h>

class AsyncSignalsBlocked {
 public:
  AsyncSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) sigdelset(&all, fault);
    pthread_sigmask(SIG_BLOCK, &all, &saved_);
  }
  ~AsyncSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  AsyncSignalsBlocked(const AsyncSignalsBlocked&) = delete;
  AsyncSignalsBlocked& operator=(const AsyncSignalsBlocked&) = delete;

 private:
  sigset_t saved_;
};

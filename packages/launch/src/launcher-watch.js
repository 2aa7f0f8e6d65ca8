/**
 * Imported into every rank ddp-run starts (node --import). A rank whose ddp-run died without
 * ending it (SIGKILL, the OOM killer) would train on unsupervised, and beside the world a
 * restarted ddp-run starts, both saving into one checkpoint directory. So a rank ends its
 * process group (each rank leads one) once its parent is no longer the ddp-run that started
 * it: polled each second, on a timer that keeps no process alive. A checkpoint save cut short
 * this way leaves the previous checkpoint loadable (the save protocol survives SIGKILL).
 */
const POLL_MS = 1000;
const launcher = Number(process.env.DDP_LAUNCHER_PID);

// only the rank itself: a process the rank starts inherits the variable but has another parent
if (Number.isInteger(launcher) && launcher > 0 && process.ppid === launcher) {
  setInterval(() => {
    if (process.ppid === launcher) return;
    try {
      process.stderr.write(`[ddp] rank ${process.env.RANK}: ddp-run (pid ${launcher}) is gone; ending this rank\n`);
    } catch {
      // its stderr was ddp-run's pipe
    }
    for (const target of [-process.pid, process.pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // not a group leader: the process alone
      }
    }
  }, POLL_MS).unref();
}

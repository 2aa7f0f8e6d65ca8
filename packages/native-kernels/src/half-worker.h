// One warm worker thread that runs half of a product while the calling thread runs the other half
// (gemm.cc at 2 threads). Persistent, so no thread start per call; the handoff spins briefly (a
// training step issues products back to back) and then sleeps on a condition variable.
#pragma once
#include <functional>

// Runs first() on the calling thread and second() on the worker, returns when both are done.
// Returns false without running anything when the worker is busy with another caller (a Node
// worker thread sharing this addon): the caller then runs the whole product itself.
bool runHalves(const std::function<void()>& first, const std::function<void()>& second);

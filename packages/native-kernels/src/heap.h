// Reading the arguments every kernel shares: the wasm heap (a Uint8Array over the tfjs-wasm
// module's memory) and byte offsets into it, checked against its length so that a wrong
// offset is an exception in JavaScript, never a write outside the heap.
#pragma once
#include <node_api.h>
#include <cstddef>
#include <cstdint>
#include <string>

struct Args {
  napi_env env;
  napi_value argv[24];
  size_t argc = 24;
  uint8_t* heap = nullptr;
  size_t heapBytes = 0;
  bool failed = false;

  Args(napi_env e, napi_callback_info info, size_t expected);
  // argument i as an integer, booleans as 0/1 (throws and sets failed when it is neither)
  int64_t integer(size_t i);
  // argument i as a number rounded to float32 (what tfjs makes of a JavaScript number operand)
  float real(size_t i);
  // float32 pointer at byte offset argument i, holding `count` elements inside the heap
  float* floats(size_t i, int64_t count);
  void fail(const std::string& message);
};

// Sets the pending exception unless one is already pending; returns nullptr for napi callbacks.
napi_value throwRange(napi_env env, const std::string& message);

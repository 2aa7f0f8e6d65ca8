// The small all-reduce over a group's shared segment in one call (exchange.cc).
#pragma once
#include <node.h>

void RegisterExchange(v8::Local<v8::Object> exports, v8::Local<v8::Context> context);

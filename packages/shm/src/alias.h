// Shared views of the wasm heap and a native finite check (alias.cc).
#pragma once
#include <node.h>

void RegisterAlias(v8::Local<v8::Object> exports, v8::Local<v8::Context> context);

#pragma once
#include <node_api.h>

napi_value BatchMatMul(napi_env env, napi_callback_info info);
napi_value Conv2D(napi_env env, napi_callback_info info);
napi_value Conv2DBackpropInput(napi_env env, napi_callback_info info);
napi_value Conv2DBackpropFilter(napi_env env, napi_callback_info info);
napi_value ConvForward(napi_env env, napi_callback_info info);
napi_value ConvBackward(napi_env env, napi_callback_info info);
napi_value Sum(napi_env env, napi_callback_info info);
napi_value Tile(napi_env env, napi_callback_info info);
napi_value AdamStep(napi_env env, napi_callback_info info);
napi_value LayerNorm(napi_env env, napi_callback_info info);
napi_value LayerNormGrad(napi_env env, napi_callback_info info);
napi_value Gelu(napi_env env, napi_callback_info info);
napi_value GeluGrad(napi_env env, napi_callback_info info);
napi_value ReluGrad(napi_env env, napi_callback_info info);
napi_value Softmax(napi_env env, napi_callback_info info);
napi_value SoftmaxGrad(napi_env env, napi_callback_info info);
napi_value BiasAdd(napi_env env, napi_callback_info info);
napi_value ChannelSum(napi_env env, napi_callback_info info);
napi_value Exp(napi_env env, napi_callback_info info);
napi_value RoundToHalf(napi_env env, napi_callback_info info);

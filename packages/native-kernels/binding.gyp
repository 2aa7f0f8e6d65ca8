{
  "targets": [
    {
      "target_name": "ddp_kernels",
      "sources": ["src/addon.cc", "src/heap.cc", "src/gemm.cc", "src/half-worker.cc", "src/conv.cc", "src/reduce.cc", "src/conv-dnnl.cc", "src/tile.cc", "src/adam.cc", "src/fused.cc", "src/exp.cc", "src/channel.cc", "src/round-half.cc"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-O3", "-std=c++17", "-fexceptions", "-ffp-contract=off", "-fno-math-errno", "-fopenmp"],
      "libraries": ["-lopenblas", "-ldnnl", "-lgomp"],
      "conditions": [["OS=='linux' and target_arch=='x64'", {"libraries": ["-lmvec"]}]]
    }
  ]
}

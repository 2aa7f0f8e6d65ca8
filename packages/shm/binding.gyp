{
  "targets": [
    {
      "target_name": "ddp_shm",
      "sources": ["src/shm.cc"],
      "cflags_cc": ["-O2", "-std=c++17"],
      "libraries": ["-lrt"]
    }
  ]
}

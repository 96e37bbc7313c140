{
  "targets": [
    {
      "target_name": "weblocks",
      "sources": [
        "src/addon.c",
        "src/errors.c",
        "src/manager.c",
        "src/poll.c",
        "src/query.c",
        "src/request.c",
        "src/wtf8.c"
      ],
      "cflags": [
        "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter",
        "<!@(sh scripts/flags.sh cflags)"
      ],
      "libraries": ["<!@(sh scripts/flags.sh libs)"]
    }
  ]
}

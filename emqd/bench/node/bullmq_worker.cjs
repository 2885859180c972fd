// BullMQ's side of emqd-bench's `worker` scenario (emqd/bench/workers.py).
//
//   node bullmq_worker.cjs DIR PORT fill N     add N jobs of ~100 bytes to queue "bench"
//   node bullmq_worker.cjs DIR PORT work C     run a Worker with a no-op async processor,
//                                              concurrency C, until SIGTERM
//
// DIR is the directory whose node_modules holds bullmq (installed by the user, never
// by emqd). The benchmark watches the queue from outside (ZCARD bull:bench:completed),
// as it watches emqd's, so nothing is timed here.
"use strict";
const path = require("path");

const [dir, port, mode, count] = process.argv.slice(2);
const { Queue, Worker } = require(path.join(dir, "node_modules", "bullmq"));
const connection = { host: "127.0.0.1", port: Number(port) };
const PAYLOAD = { p: "p".repeat(92) }; // {"p":"ppp..."}: 100 bytes of JSON

async function fill(total) {
  const queue = new Queue("bench", { connection });
  for (let added = 0; added < total; added += 1000) {
    const n = Math.min(1000, total - added);
    await queue.addBulk(Array.from({ length: n }, () => ({ name: "job", data: PAYLOAD })));
  }
  await queue.close();
}

function work(concurrency) {
  const worker = new Worker("bench", async () => {}, { connection, concurrency });
  const stop = async () => {
    await worker.close();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

if (mode === "fill") {
  fill(Number(count)).catch((error) => {
    console.error(error);
    process.exit(1);
  });
} else {
  work(Number(count));
}

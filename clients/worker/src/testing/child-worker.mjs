// A worker in a process of its own, for the test that kills one with
// SIGKILL: built @convo/worker (dist), one slot, a lease of
// CONVO_LEASE_SECONDS; its handler writes "partial " and waits. It prints
// "ready" once it claims prompts.
import { Worker } from "../../dist/index.js";

const worker = new Worker({
  connectionString: process.env.DATABASE_URL,
  workerId: process.env.CONVO_WORKER_ID,
  slots: 1,
  leaseSeconds: Number(process.env.CONVO_LEASE_SECONDS),
  pollIntervalMs: 200,
  handler: async (job) => {
    job.reply.text("partial ");
    await new Promise((resolve) => job.signal.addEventListener("abort", resolve));
  },
});
await worker.start();
console.log("ready");

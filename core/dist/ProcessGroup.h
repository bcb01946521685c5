// The processes of one distributed job (the GPUs of a host, or several hosts) and the few collectives the
// engine needs, through the collective library LibTorch ships (c10d): ProcessGroupNCCL between GPUs,
// ProcessGroupGloo between CPUs, a TCPStore on rank 0 for the rendezvous. This pair of files is the only code
// that sees c10d, whose API differs between LibTorch 1.13 and 2.x; the rest of the engine sees tensors and ranks.
//
// Every collective has a timeout (ProcessGroupOptions::timeout), so a rank that died or hangs stops the others
// with an error instead of a wait without end; the error names the rank that reported a failure when one did.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace pareto {

struct ProcessGroupOptions {
  int rank = 0;
  int worldSize = 1;
  std::string masterHost = "127.0.0.1";   // where rank 0 serves the rendezvous store
  int masterPort = 29500;
  // CUDA: NCCL between the ranks' GPUs (this rank's GPU); CPU: gloo over TCP.
  c10::Device device = c10::Device(c10::kCPU);
  // Of the rendezvous and of every collective: how long a rank waits for the others before it fails the job.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
};

// "HOST:PORT" (the --master option) into options.masterHost and masterPort; throws InputError for anything else.
void parseMasterAddress(const std::string& text, ProcessGroupOptions& options);

class ProcessGroup {
 public:
  // Joins the job: rank 0 serves the store, the others connect to it; returns once all worldSize ranks are
  // there. Throws Error naming the master address when the rendezvous fails or times out, InputError for a bad
  // rank or size, or a device this LibTorch has no backend for.
  explicit ProcessGroup(const ProcessGroupOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int size() const;
  std::string backend() const;   // "gloo", "nccl"

  // In place on `t` (any device and dtype: it is staged on the backend's device and copied back).
  void allReduceSum(const at::Tensor& t);
  void broadcast(const at::Tensor& t, int root);
  // Root's bytes into every rank's `bytes`.
  void broadcastBytes(std::string& bytes, int root);
  void barrier();
  // Whether `flag` is set on any rank (every rank gets the same answer): a cancel seen by one rank stops all.
  bool any(bool flag);

  // Tells the other ranks why this one stops (best effort; they name it in their errors).
  void reportFailure(const std::string& message) noexcept;

  // Fault injection for the tests: PARETO_TEST_KILL_RANK=R:L makes rank R kill itself (SIGKILL, as a crashed
  // host would stop) when the sequential pass reaches layer L.
  void faultPoint(int64_t layer) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pareto

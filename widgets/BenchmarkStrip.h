// The live benchmark strip (a central tab): the benchmark of the loaded model as it runs. Kernel points: one bar
// of achieved GB/s per kernel format at the model's linear shapes, and on the right axis the tokens/s the model's
// linear layers would decode at with that kernel. Decode points: the real decode loop (embedding, attention with
// its KV cache, norms, every linear in its format, output head, greedy sampling) of the model, one bar of GB/s per
// weight format and its measured tokens/s on the right axis. A horizontal line marks the measured copy bandwidth
// (the ceiling of anything that streams its weights once). The numbers come from core (runtime/KernelBenchmark.h
// and decode/DecodeBenchmark.h, run by the window's BenchmarkWorker); the strip only shows them. On a machine
// without CUDA the timings are the kernels' float64 CPU references, and the strip says so in its title and status.
#pragma once

#include <QMetaType>
#include <QString>
#include <QVector>
#include <QWidget>
#include <limits>

class QCustomPlot;
class QLabel;
class QProgressBar;
class QPushButton;

namespace pareto {

// One measured row. Kernel rows are `bench kernels` formats at the model's linear shapes; Decode rows are
// `bench decode` results: the whole decode loop of the model in one weight format (batch 1).
struct BenchmarkPoint {
  enum class Kind { Kernel, Decode };
  Kind kind = Kind::Kernel;
  QString name;                   // "bitmask-2:4" (a kernel format, or the decode loop's weight format)
  bool available = true;          // false: the format cannot run here (note says why)
  QString note;
  // Kernel: median time of one step of the linears; Decode: median time per generated token.
  double msPerStep = std::numeric_limits<double>::quiet_NaN();
  double gbPerSecond = std::numeric_limits<double>::quiet_NaN();      // bytes read per step / time
  double fractionOfCopy = std::numeric_limits<double>::quiet_NaN();   // gbPerSecond / copy bandwidth
  double speedupOverDense = std::numeric_limits<double>::quiet_NaN(); // dense time / this time, same session and kind
  double bitsPerWeight = std::numeric_limits<double>::quiet_NaN();    // linear layout bytes · 8 / weights
  // Kernel: the model's linears alone at this step time; Decode: measured tokens/s of the decode loop.
  double tokensPerSecond = std::numeric_limits<double>::quiet_NaN();
  int context = 0;                // Decode: tokens in the KV cache when timing starts
  int newTokens = 0;              // Decode: tokens generated per timed run
};

// What a benchmark session measures, known before its first result.
struct BenchmarkSession {
  QString device;              // "NVIDIA H200 (cuda:0)", "CPU"
  QString shape;               // "ref-tiny: 1 of 4 layers (qkv, o, gate+up, down)"
  double copyGbPerSecond = 0;  // measured copy bandwidth of the device, (read + written bytes) / time
  bool cpuReference = false;   // timings of the float64 CPU references, not of GPU kernels
  QString note;                // why it runs the CPU references, formats left out, ...
  int formats = 0;             // results to expect (kernel formats and decode results together)
  QString decodeShape;         // the decode loop measured after the kernels ("" : none), e.g.
                               // "tiny-llama (1 layers) · context 8 · 4 new tokens · 1 run · eager (CPU references)"
};

class BenchmarkStrip : public QWidget {
  Q_OBJECT

 public:
  static const QString kCpuReferenceLabel;   // "CPU reference (float64) — not GPU speed"

  explicit BenchmarkStrip(QWidget* parent = nullptr);

  void start(const BenchmarkSession& session);
  void addPoint(const BenchmarkPoint& point);
  void setProgress(double fraction, const QString& message);
  // The session ended (finished, cancelled or failed): the message replaces the progress.
  void finish(const QString& message);
  // Whether the "Benchmark" button may start one, and why not.
  void setRunnable(bool runnable, const QString& why);

  bool isRunning() const { return running_; }
  const BenchmarkSession& session() const { return session_; }
  const QVector<BenchmarkPoint>& points() const { return points_; }
  QCustomPlot* plot() const { return plot_; }
  QString status() const;
  bool writeCsv(const QString& path, QString* error) const;

 signals:
  void runRequested();
  void cancelRequested();

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void rebuild();
  void updateButtons();

  BenchmarkSession session_;
  QString sessionText_;   // the device, shape and note lines of the status
  QVector<BenchmarkPoint> points_;
  bool running_ = false;
  bool runnable_ = false;
  QString why_;
  QPushButton* run_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* summary_ = nullptr;
  QCustomPlot* plot_ = nullptr;
};

}  // namespace pareto

Q_DECLARE_METATYPE(pareto::BenchmarkPoint)
Q_DECLARE_METATYPE(pareto::BenchmarkSession)

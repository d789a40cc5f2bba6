// Metrics: the in-process registry behind GET /metrics (Prometheus text format 0.0.4).
// Counters and histograms are updated where things happen (HTTP requests here, commands
// through Interpreter's on_command hook); gauges are sampled by callbacks at scrape time,
// so any module can expose one (open SSH sessions, MCP sessions, VMs by state) without
// this registry knowing it. No external library: the format is a few lines of text.
// Thread-safe: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace warren {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

struct GaugeSample {
  MetricLabels labels;
  double value = 0;
};

class Metrics {
 public:
  // Declares a counter; Inc on an undeclared name declares it with no help text.
  void DeclareCounter(const std::string& name, const std::string& help);
  void Inc(const std::string& name, const MetricLabels& labels, double by = 1);

  // Declares a histogram with upper bounds `buckets` (ascending; +Inf is implied).
  void DeclareHistogram(const std::string& name, const std::string& help,
                        std::vector<double> buckets);
  // Records one observation; a no-op for an undeclared histogram.
  void Observe(const std::string& name, const MetricLabels& labels, double value);

  // A gauge sampled at each scrape. `sample` runs without the registry's lock held, may
  // take its own locks, and must be cheap. A second gauge with the same name replaces the
  // first.
  void AddGauge(const std::string& name, const std::string& help,
                std::function<std::vector<GaugeSample>()> sample);

  // Everything, in the Prometheus text exposition format.
  std::string Render() const;

  // Latency buckets in seconds, from 1 ms to 5 min: commands range from `whoami` to `new`.
  static std::vector<double> LatencyBuckets();

 private:
  struct Histogram {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // per bound, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  struct Family {
    std::string help;
    std::string type;             // "counter", "histogram"
    std::vector<double> buckets;  // histograms
    std::map<MetricLabels, double> counters;
    std::map<MetricLabels, Histogram> histograms;
  };
  struct Gauge {
    std::string help;
    std::function<std::vector<GaugeSample>()> sample;
  };

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::map<std::string, Gauge> gauges_;
};

// `value` escaped for a label value: backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);

}  // namespace warren

#include "bridge/metrics.h"

#include <cmath>
#include <cstdio>

namespace warren {
namespace {

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string LabelText(const MetricLabels& labels, const std::string& extra_key = "",
                      const std::string& extra_value = "") {
  std::string out;
  auto add = [&out](const std::string& k, const std::string& v) {
    out += out.empty() ? "{" : ",";
    out += k + "=\"" + EscapeLabelValue(v) + "\"";
  };
  for (const auto& [k, v] : labels) add(k, v);
  if (!extra_key.empty()) add(extra_key, extra_value);
  if (!out.empty()) out += "}";
  return out;
}

void Header(std::string& out, const std::string& name, const std::string& help,
            const std::string& type) {
  if (!help.empty()) out += "# HELP " + name + " " + help + "\n";
  out += "# TYPE " + name + " " + type + "\n";
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<double> Metrics::LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

void Metrics::DeclareCounter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mu_);
  Family& f = families_[name];
  f.help = help;
  f.type = "counter";
}

void Metrics::Inc(const std::string& name, const MetricLabels& labels, double by) {
  std::lock_guard lock(mu_);
  Family& f = families_[name];
  if (f.type.empty()) f.type = "counter";
  if (f.type != "counter") return;
  f.counters[labels] += by;
}

void Metrics::DeclareHistogram(const std::string& name, const std::string& help,
                               std::vector<double> buckets) {
  std::lock_guard lock(mu_);
  Family& f = families_[name];
  f.help = help;
  f.type = "histogram";
  f.buckets = std::move(buckets);
}

void Metrics::Observe(const std::string& name, const MetricLabels& labels, double value) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end() || it->second.type != "histogram") return;
  Family& f = it->second;
  Histogram& h = f.histograms[labels];
  if (h.bounds.empty()) {
    h.bounds = f.buckets;
    h.counts.assign(h.bounds.size(), 0);
  }
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    if (value <= h.bounds[i]) {
      ++h.counts[i];
      break;
    }
  }
  ++h.count;
  h.sum += value;
}

void Metrics::AddGauge(const std::string& name, const std::string& help,
                       std::function<std::vector<GaugeSample>()> sample) {
  std::lock_guard lock(mu_);
  gauges_[name] = Gauge{help, std::move(sample)};
}

std::string Metrics::Render() const {
  std::string out;
  std::map<std::string, Gauge> gauges;
  {
    std::lock_guard lock(mu_);
    gauges = gauges_;
    for (const auto& [name, f] : families_) {
      Header(out, name, f.help, f.type);
      if (f.type == "counter") {
        for (const auto& [labels, v] : f.counters) {
          out += name + LabelText(labels) + " " + FormatValue(v) + "\n";
        }
        continue;
      }
      for (const auto& [labels, h] : f.histograms) {
        uint64_t cumulative = 0;
        for (size_t i = 0; i < h.bounds.size(); ++i) {
          cumulative += h.counts[i];
          out += name + "_bucket" + LabelText(labels, "le", FormatValue(h.bounds[i])) + " " +
                 std::to_string(cumulative) + "\n";
        }
        out += name + "_bucket" + LabelText(labels, "le", "+Inf") + " " + std::to_string(h.count) +
               "\n";
        out += name + "_sum" + LabelText(labels) + " " + FormatValue(h.sum) + "\n";
        out += name + "_count" + LabelText(labels) + " " + std::to_string(h.count) + "\n";
      }
    }
  }
  // Sampled outside the lock: a sampler may take its own locks (the store, a server's).
  for (const auto& [name, g] : gauges) {
    Header(out, name, g.help, "gauge");
    for (const GaugeSample& s : g.sample()) {
      out += name + LabelText(s.labels) + " " + FormatValue(s.value) + "\n";
    }
  }
  return out;
}

}  // namespace warren

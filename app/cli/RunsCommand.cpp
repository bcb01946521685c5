// `pareto-cli runs`: the run history of the experiment store. list, show (--recipe prints a re-runnable
// recipe), compare side by side, export as CSV or JSON, delete.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "RunRecording.h"
#include "store/ExperimentStore.h"
#include "util/Error.h"
#include "util/FileSystem.h"

namespace pareto::cli {
namespace {

using json = nlohmann::json;

std::string localTime(double epoch) {
  if (!std::isfinite(epoch)) return "-";
  const std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

json isoTime(double epoch) {
  if (!std::isfinite(epoch)) return nullptr;
  const std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double duration(const RunSummary& r) { return std::isfinite(r.endedAt) ? r.endedAt - r.startedAt : NAN; }

std::string durationText(double s) {
  if (!std::isfinite(s)) return "-";
  std::ostringstream o;
  o << std::fixed;
  if (s < 60)
    o << std::setprecision(1) << s << " s";
  else if (s < 3600)
    o << int(s / 60) << "m " << std::setw(2) << std::setfill('0') << int(std::fmod(s, 60)) << "s";
  else
    o << int(s / 3600) << "h " << std::setw(2) << std::setfill('0') << int(std::fmod(s, 3600) / 60) << "m";
  return o.str();
}

std::string number(double v, int digits = 6) {
  if (std::isnan(v)) return "nan";
  // Counts (tokens, bytes, windows) are stored as REAL like everything else; print them whole.
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// A number JSON can hold (NaN and infinities are not JSON): null instead.
json jsonNumber(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string baseName(const std::string& path) {
  if (path.empty()) return "-";
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string shorten(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width > 3 ? width - 3 : 0) + "...";
}

// The one or two numbers a list row shows for each kind of run.
std::string headline(const RunSummary& r) {
  if (r.status == RunStatus::Failed || r.status == RunStatus::Cancelled) return r.error;
  if (r.status == RunStatus::Interrupted)
    return "process " + std::to_string(r.process.pid) + " ended without finishing";
  auto get = [&](const std::string& name) {
    auto it = r.metrics.find(name);
    return it == r.metrics.end() ? NAN : it->second;
  };
  std::ostringstream o;
  o << std::fixed;
  if (r.kind == "compress" && !std::isnan(get("linear_bits_per_weight")))
    o << std::setprecision(3) << get("linear_bits_per_weight") << " bits/weight (linears), " << std::setprecision(3)
      << get("model_bits_per_weight") << " (model)";
  else if (r.kind == "perplexity" && !std::isnan(get("ppl")))
    o << "ppl " << std::setprecision(4) << get("ppl") << " (" << number(get("windows")) << " windows)";
  else if (r.kind == "fidelity" && !std::isnan(get("top1_agreement")))
    o << "top-1 " << std::setprecision(1) << 100 * get("top1_agreement") << "%, decode NLL " << std::setprecision(4)
      << get("decode_nll");
  else if (r.kind == "hessian" && !std::isnan(get("median_ratio")))
    o << "decode closer for " << std::setprecision(1) << 100 * get("fraction_decode_smaller")
      << "% of modules, median ratio " << std::setprecision(2) << get("median_ratio");
  else if (r.kind == "drift" && !std::isnan(get("steps")))
    o << number(get("steps")) << " steps, " << number(get("prompts")) << " prompts";
  return o.str();
}

json summaryJson(const RunSummary& r) {
  json metrics = json::object();
  for (const auto& [k, v] : r.metrics) metrics[k] = jsonNumber(v);
  return {{"id", r.id},
          {"kind", r.kind},
          {"status", runStatusName(r.status)},
          {"started_at", isoTime(r.startedAt)},
          {"ended_at", isoTime(r.endedAt)},
          {"seconds", jsonNumber(duration(r))},
          {"model",
           {{"path", r.modelPath}, {"content_hash", r.modelHash}, {"architecture", r.architecture},
            {"size_bytes", r.modelSize}}},
          {"device", r.device},
          {"output", r.output},
          {"error", r.error},
          {"process", {{"pid", r.process.pid}, {"host", r.process.host}}},
          {"tag", r.tag},
          {"note", r.note},
          {"metrics", metrics}};
}

json detailsJson(const RunDetails& d) {
  json j = summaryJson(d.summary);
  j["recipe"] = d.recipe;
  j["versions"] = d.versions;
  json modules = json::object();
  for (const auto& s : d.moduleStats) modules[s.module][s.name] = jsonNumber(s.value);
  j["module_stats"] = modules;
  json curves = json::object();
  for (const auto& c : d.curves) {
    json y = json::array();
    for (double v : c.y) y.push_back(jsonNumber(v));
    curves[c.name] = {{"x", c.x}, {"y", y}};
  }
  j["curves"] = curves;
  json bench = json::array();
  for (const auto& b : d.benchmarks)
    bench.push_back({{"device", b.device}, {"kernel", b.kernel}, {"shape", b.shape}, {"batch", b.batch},
                     {"time_us", jsonNumber(b.timeUs)}, {"gbps", jsonNumber(b.gbps)}});
  j["benchmarks"] = bench;
  return j;
}

std::string listText(const std::vector<RunSummary>& runs, const std::string& db) {
  if (runs.empty()) return "no runs recorded in " + db;
  std::ostringstream o;
  o << std::left << std::setw(6) << "id" << std::setw(11) << "kind" << std::setw(12) << "status" << std::setw(21)
    << "started" << std::setw(10) << "took" << std::setw(22) << "model" << std::setw(13) << "tag" << "result\n";
  for (const auto& r : runs) {
    o << std::left << std::setw(6) << r.id << std::setw(11) << r.kind << std::setw(12) << runStatusName(r.status)
      << std::setw(21) << localTime(r.startedAt) << std::setw(10) << durationText(duration(r)) << std::setw(22)
      << shorten(baseName(r.modelPath), 21) << std::setw(13) << shorten(r.tag.empty() ? "-" : r.tag, 12)
      << shorten(headline(r), 80) << "\n";
    if (!r.note.empty()) o << "      note: " << shorten(r.note.substr(0, r.note.find('\n')), 100) << "\n";
  }
  o << runs.size() << " run" << (runs.size() == 1 ? "" : "s") << " in " << db;
  return o.str();
}

std::string showText(const RunDetails& d) {
  const RunSummary& r = d.summary;
  std::ostringstream o;
  o << "run " << r.id << " (" << r.kind << "): " << runStatusName(r.status) << "\n";
  o << "  started   " << localTime(r.startedAt) << ", took " << durationText(duration(r)) << "\n";
  if (!r.modelPath.empty())
    o << "  model     " << r.modelPath << " (" << (r.architecture.empty() ? "?" : r.architecture) << ", hash "
      << r.modelHash << ", " << std::fixed << std::setprecision(1) << r.modelSize / 1048576.0 << " MiB)\n";
  o << "  device    " << (r.device.empty() ? "-" : r.device) << "\n";
  if (!r.output.empty()) o << "  output    " << r.output << "\n";
  if (r.process.pid > 0) o << "  process   pid " << r.process.pid << " on " << r.process.host << "\n";
  if (d.versions.is_object() && !d.versions.empty()) {
    o << "  versions ";
    for (const auto& [k, v] : d.versions.items())
      o << " " << k << " " << (v.is_string() ? v.get<std::string>() : v.dump());
    o << "\n";
  }
  if (!r.error.empty()) o << "  error     " << r.error << "\n";
  if (!r.tag.empty()) o << "  tag       " << r.tag << "\n";
  if (!r.note.empty()) {
    std::istringstream note(r.note);
    bool first = true;
    for (std::string line; std::getline(note, line); first = false) o << (first ? "  note      " : "            ") << line << "\n";
  }
  o << "  " << (r.kind == "compress" ? "recipe" : "settings") << "\n";
  std::istringstream recipe(d.recipe.dump(2));
  for (std::string line; std::getline(recipe, line);) o << "    " << line << "\n";
  if (!d.metrics.empty()) {
    size_t w = 6;
    for (const auto& m : d.metrics) w = std::max(w, m.name.size());
    o << "  metrics\n";
    for (const auto& m : d.metrics)
      o << "    " << std::left << std::setw(static_cast<int>(w)) << m.name << "  " << number(m.value, 8) << "\n";
  }
  if (!d.moduleStats.empty()) {
    // Modules as rows, statistics as columns, in the order they were recorded.
    std::vector<std::string> modules, names;
    std::map<std::pair<std::string, std::string>, double> values;
    for (const auto& s : d.moduleStats) {
      if (std::find(modules.begin(), modules.end(), s.module) == modules.end()) modules.push_back(s.module);
      if (std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
      values[{s.module, s.name}] = s.value;
    }
    size_t w = 6;
    for (const auto& m : modules) w = std::max(w, m.size());
    o << "  module statistics\n    " << std::left << std::setw(static_cast<int>(w)) << "module";
    for (const auto& n : names) o << std::right << std::setw(static_cast<int>(std::max<size_t>(n.size(), 10)) + 2) << n;
    o << "\n";
    for (const auto& m : modules) {
      o << "    " << std::left << std::setw(static_cast<int>(w)) << m;
      for (const auto& n : names) {
        auto it = values.find({m, n});
        o << std::right << std::setw(static_cast<int>(std::max<size_t>(n.size(), 10)) + 2)
          << (it == values.end() ? "-" : number(it->second, 5));
      }
      o << "\n";
    }
  }
  if (!d.curves.empty()) {
    o << "  curves (" << d.curves.size() << "; `runs export` writes the points)\n";
    for (const auto& c : d.curves) {
      double lo = INFINITY, hi = -INFINITY;
      for (double y : c.y)
        if (!std::isnan(y)) lo = std::min(lo, y), hi = std::max(hi, y);
      o << "    " << c.name << ": " << c.x.size() << " points";
      if (!c.x.empty())
        o << ", x " << number(c.x.front()) << ".." << number(c.x.back()) << ", y " << number(lo) << ".." << number(hi);
      o << "\n";
    }
  }
  if (!d.benchmarks.empty()) {
    o << "  benchmarks\n";
    for (const auto& b : d.benchmarks)
      o << "    " << b.kernel << " " << b.shape << " batch " << b.batch << " on " << b.device << ": "
        << number(b.timeUs) << " us" << (std::isnan(b.gbps) ? "" : ", " + number(b.gbps) + " GB/s") << "\n";
  }
  std::string text = o.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// Rows of a side-by-side comparison: what ran, on what, with which recipe or settings, and what came out.
struct Comparison {
  std::vector<std::string> names;
  std::map<std::string, std::vector<json>> values;
  void set(const std::string& name, size_t run, size_t runs, json v) {
    auto [it, inserted] = values.try_emplace(name, std::vector<json>(runs, json(nullptr)));
    if (inserted) names.push_back(name);
    it->second[run] = std::move(v);
  }
  bool differs(const std::string& name) const {
    const auto& v = values.at(name);
    return std::any_of(v.begin(), v.end(), [&](const json& x) { return x != v.front(); });
  }
};

Comparison compareRuns(const std::vector<RunDetails>& runs) {
  Comparison c;
  const size_t n = runs.size();
  for (size_t i = 0; i < n; ++i) {
    const RunSummary& r = runs[i].summary;
    c.set("kind", i, n, r.kind);
    c.set("status", i, n, runStatusName(r.status));
    c.set("model", i, n, r.modelPath);
    c.set("model hash", i, n, r.modelHash);
    c.set("device", i, n, r.device);
    c.set("started", i, n, localTime(r.startedAt));
    c.set("seconds", i, n, jsonNumber(duration(r)));
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string prefix = runs[i].summary.kind == "compress" ? "recipe" : "settings";
    if (!runs[i].recipe.is_object()) continue;
    const json flat = runs[i].recipe.flatten();   // a named object: items() only refers to it
    for (const auto& [pointer, v] : flat.items()) {
      std::string key = pointer;
      std::replace(key.begin(), key.end(), '/', '.');
      c.set(prefix + key, i, n, v);
    }
  }
  for (size_t i = 0; i < n; ++i)
    for (const auto& m : runs[i].metrics) c.set(m.name, i, n, jsonNumber(m.value));
  return c;
}

std::string cell(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return number(v.get<double>());
  return v.dump();
}

std::string compareText(const std::vector<RunDetails>& runs, const Comparison& c, bool diffOnly) {
  std::vector<std::string> rows;
  for (const auto& name : c.names)
    if (!diffOnly || c.differs(name)) rows.push_back(name);
  size_t w = 6;
  for (const auto& r : rows) w = std::min<size_t>(std::max(w, r.size()), 44);
  std::vector<size_t> widths;
  for (size_t i = 0; i < runs.size(); ++i) {
    size_t cw = std::to_string(runs[i].summary.id).size() + 4;
    for (const auto& r : rows) cw = std::max(cw, std::min<size_t>(cell(c.values.at(r)[i]).size(), 40));
    widths.push_back(cw);
  }
  std::ostringstream o;
  o << std::left << std::setw(static_cast<int>(w)) << "";
  // The last column is padded only when a difference marker follows it.
  auto column = [&](size_t i, const std::string& text, bool marked) {
    o << "  " << std::setw(i + 1 < runs.size() || marked ? static_cast<int>(widths[i]) : 0) << text;
  };
  for (size_t i = 0; i < runs.size(); ++i) column(i, "run " + std::to_string(runs[i].summary.id), false);
  o << "\n";
  for (const auto& r : rows) {
    const bool marked = c.differs(r) && !diffOnly;
    o << std::left << std::setw(static_cast<int>(w)) << shorten(r, w);
    for (size_t i = 0; i < runs.size(); ++i) column(i, shorten(cell(c.values.at(r)[i]), 40), marked);
    o << (marked ? "  *" : "") << "\n";
  }
  if (rows.empty()) o << "(no differences)\n";
  else if (!diffOnly) o << "* differs between the runs\n";
  std::string text = o.str();
  text.pop_back();
  return text;
}

std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

std::string csvNumber(double v) { return std::isnan(v) ? std::string() : number(v, 12); }

// Long ("tidy") format: one value per line, so metrics, module statistics, curves and benchmarks of runs of any
// kind share one table that spreadsheets and pandas pivot as they like.
void writeCsv(std::ostream& out, const std::vector<RunDetails>& runs) {
  out << "run,kind,model,device,table,module,name,x,value\n";
  for (const auto& d : runs) {
    const RunSummary& r = d.summary;
    const std::string head = std::to_string(r.id) + "," + csvField(r.kind) + "," + csvField(r.modelPath) + ",";
    for (const auto& m : d.metrics)
      out << head << csvField(r.device) << ",metric,," << csvField(m.name) << ",," << csvNumber(m.value) << "\n";
    for (const auto& s : d.moduleStats)
      out << head << csvField(r.device) << ",module_stat," << csvField(s.module) << "," << csvField(s.name) << ",,"
          << csvNumber(s.value) << "\n";
    for (const auto& c : d.curves)
      for (size_t i = 0; i < c.x.size(); ++i)
        out << head << csvField(r.device) << ",curve,," << csvField(c.name) << "," << csvNumber(c.x[i]) << ","
            << csvNumber(c.y[i]) << "\n";
    for (const auto& b : d.benchmarks) {
      const std::string what = csvField(b.device) + ",benchmark," + csvField(b.kernel + " " + b.shape) + ",";
      out << head << what << "time_us," << b.batch << "," << csvNumber(b.timeUs) << "\n";
      if (!std::isnan(b.gbps)) out << head << what << "gbps," << b.batch << "," << csvNumber(b.gbps) << "\n";
    }
  }
}

// "-" is stdout (checked when the command ends); a file is written through a temporary name, so a full disk
// leaves the previous file or none, never a short one, and the error names it.
void writeOutput(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (path == "-") {
    write(std::cout);
    checkStdout();
    return;
  }
  std::ostringstream text;
  write(text);
  writeFileAtomically(path, text.str());
}

std::vector<RunDetails> loadRuns(const ExperimentStore& store, const std::vector<int64_t>& ids) {
  std::vector<RunDetails> runs;
  for (int64_t id : ids) runs.push_back(store.run(id));
  return runs;
}

}  // namespace

void addRunsCommand(CLI::App& app) {
  CLI::App* runs = app.add_subcommand(
      "runs", "The run history of the experiment database (--db): list, show, compare, export, delete");
  runs->require_subcommand(1);

  {
    struct Args {
      RunFilter filter;
      int64_t limit = 0;
      bool json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd =
        runs->add_subcommand("list", "Recorded runs, newest first; a run whose process died shows as interrupted");
    cmd->add_option("--model", args->filter.model, "Only runs on models whose folder path contains this");
    cmd->add_option("--kind", args->filter.kind, "Only runs of this kind")
        ->check(CLI::IsMember(runKinds()));
    cmd->add_option("--limit", args->limit, "Show at most N runs (0: all)")->check(CLI::NonNegativeNumber);
    cmd->add_flag("--json", args->json, "Print one JSON object {\"database\", \"runs\": [...]}");
    cmd->callback([args] {
      ExperimentStore store = openStoreForReading();
      RunFilter f = args->filter;
      // A folder given as it exists on disk matches by its absolute path ("./ref-tiny/" finds ref-tiny's runs).
      std::error_code ec;
      if (!f.model.empty() && std::filesystem::is_directory(f.model, ec)) f.model = absolutePath(f.model);
      std::vector<RunSummary> list = store.listRuns(f);
      if (args->limit > 0 && static_cast<int64_t>(list.size()) > args->limit)
        list.resize(static_cast<size_t>(args->limit));
      json items = json::array();
      for (const auto& r : list) items.push_back(summaryJson(r));
      printResult(args->json, {{"database", store.path()}, {"runs", items}}, listText(list, store.path()));
    });
  }
  {
    struct Args {
      int64_t id = 0;
      bool recipe = false, json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd = runs->add_subcommand("show", "Everything recorded for one run");
    cmd->add_option("id", args->id, "Run id (see `runs list`)")->required();
    cmd->add_flag("--recipe", args->recipe,
                  "Print only the run's recipe as JSON (re-runnable: `runs show ID --recipe > r.json; compress "
                  "--recipe r.json ...`)");
    cmd->add_flag("--json", args->json, "Print one JSON object with everything (metrics, module stats, curves)");
    cmd->callback([args] {
      ExperimentStore store = openStoreForReading();
      RunDetails d = store.run(args->id);
      if (args->recipe) {
        if (d.summary.kind != "compress")
          throw InputError("run " + std::to_string(args->id) + " is a " + d.summary.kind +
                           " run; only compress runs have a recipe (its settings are in `runs show " +
                           std::to_string(args->id) + "`)");
        std::cout << d.recipe.dump(2) << std::endl;
        return;
      }
      printResult(args->json, detailsJson(d), showText(d));
    });
  }
  {
    struct Args {
      std::vector<int64_t> ids;
      bool diffOnly = false, json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd = runs->add_subcommand(
        "compare", "Runs side by side: model, device, recipe or settings, and every metric");
    cmd->add_option("ids", args->ids, "Two or more run ids")->required();
    cmd->add_flag("--diff-only", args->diffOnly, "Show only the rows that differ between the runs");
    cmd->add_flag("--json", args->json, "Print one JSON object {\"runs\": [ids], \"rows\": [{name, values, differs}]}");
    cmd->callback([args] {
      if (args->ids.size() < 2) throw InputError("runs compare needs at least two run ids");
      ExperimentStore store = openStoreForReading();
      std::vector<RunDetails> list = loadRuns(store, args->ids);
      Comparison c = compareRuns(list);
      json rows = json::array();
      for (const auto& name : c.names)
        if (!args->diffOnly || c.differs(name))
          rows.push_back({{"name", name}, {"values", c.values.at(name)}, {"differs", c.differs(name)}});
      printResult(args->json, {{"runs", args->ids}, {"rows", rows}}, compareText(list, c, args->diffOnly));
    });
  }
  {
    struct Args {
      std::vector<int64_t> ids;
      std::string csv, json;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd = runs->add_subcommand(
        "export", "Metrics, module statistics, curves and benchmarks of runs as CSV (one value per line) or JSON");
    cmd->add_option("ids", args->ids, "Run ids")->required();
    cmd->add_option("--csv", args->csv, "CSV file (- for stdout): run,kind,model,device,table,module,name,x,value");
    cmd->add_option("--json", args->json, "JSON file (- for stdout): a list of runs as `runs show --json` prints them");
    cmd->callback([args] {
      if (args->csv.empty() && args->json.empty()) throw InputError("runs export needs --csv FILE and/or --json FILE");
      if (args->csv == "-" && args->json == "-") throw InputError("runs export: only one of --csv and --json can be -");
      ExperimentStore store = openStoreForReading();
      std::vector<RunDetails> list = loadRuns(store, args->ids);
      if (!args->csv.empty()) writeOutput(args->csv, [&](std::ostream& o) { writeCsv(o, list); });
      if (!args->json.empty())
        writeOutput(args->json, [&](std::ostream& o) {
          json all = json::array();
          for (const auto& d : list) all.push_back(detailsJson(d));
          o << all.dump(2) << "\n";
        });
    });
  }
  {
    struct Args {
      int64_t id = 0;
      std::string tag, note;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd = runs->add_subcommand(
        "label", "Set a run's tag (one word or line to find it by: baseline, paper) and note (free text); the "
                 "workbench's Runs dock shows and edits the same");
    cmd->add_option("id", args->id, "Run id (see `runs list`)")->required();
    CLI::Option* tag = cmd->add_option("--tag", args->tag, "The tag (\"\" clears it)");
    CLI::Option* note = cmd->add_option("--note", args->note, "The note (\"\" clears it)");
    cmd->callback([args, tag, note] {
      if (tag->count() == 0 && note->count() == 0) throw InputError("runs label: give --tag, --note or both");
      ExperimentStore store = openStore();
      const RunSummary before = store.run(args->id).summary;
      store.setRunLabel(args->id, tag->count() ? args->tag : before.tag, note->count() ? args->note : before.note);
      std::cout << showText(store.run(args->id)) << std::endl;
    });
  }
  {
    struct Args {
      std::vector<int64_t> ids;
      bool force = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd = runs->add_subcommand("delete", "Delete runs and everything recorded with them");
    cmd->add_option("ids", args->ids, "Run ids")->required();
    cmd->add_flag("--force", args->force, "Also delete runs that are still running");
    cmd->callback([args] {
      ExperimentStore store = openStore();
      // Check every id first, so a typo in the third id does not leave the first two deleted.
      for (int64_t id : args->ids) {
        RunDetails d = store.run(id);
        if (d.summary.status == RunStatus::Running && !args->force)
          throw InputError("run " + std::to_string(id) + " is still running (pid " +
                           std::to_string(d.summary.process.pid) + " on " + d.summary.process.host +
                           "); --force deletes it anyway");
      }
      for (int64_t id : args->ids) store.deleteRun(id);
      std::cout << "deleted " << args->ids.size() << " run" << (args->ids.size() == 1 ? "" : "s") << " from "
                << store.path() << std::endl;
    });
  }
}

}  // namespace pareto::cli

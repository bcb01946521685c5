// A compress run's drift matrices and per-module discrepancy go into the run store with its result and come back
// as the analyses the workbench draws (jobs/StoredAnalyses.h), through a real store file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "SharedData.h"
#include "jobs/StoredAnalyses.h"
#include "store/ExperimentStore.h"
#include "store/ResultJson.h"

namespace pareto {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ActivationDriftResult driftOfThreeLayers() {
  ActivationDriftResult d;
  d.layers = 3;
  d.steps = 4;
  d.prompts = 5;
  d.free.drift = {{0.0, 0.0, 0.0, kNaN}, {0.1, 0.2, 0.25, kNaN}, {0.3, 0.5, 0.6, kNaN}};
  d.free.counts = {5, 4, 2, 0};   // no prompt reached the last step
  d.forced.drift = {{0.0, 0.0, 0.0, 0.0}, {0.05, 0.1, 0.12, 0.13}, {0.2, 0.3, 0.35, 0.36}};
  d.forced.counts = {5, 5, 5, 5};
  summarizeDriftCurves(d.free);
  summarizeDriftCurves(d.forced);
  return d;
}

HessianStudyResult studyOfThreeModules() {
  HessianStudyResult s;
  const char* names[] = {"model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj", "model.layers.1.mlp.up_proj"};
  const double text[] = {0.9, 2.0, 0.5}, decode[] = {0.3, 2.5, 0.1};
  for (int i = 0; i < 3; ++i) {
    ModuleDiscrepancy m;
    m.name = names[i];
    m.columns = 64 * (i + 1);
    m.text.delta = text[i];
    m.decode.delta = decode[i];
    s.modules.push_back(m);
  }
  return s;
}

void expectSameCurves(const DriftCurves& got, const DriftCurves& want) {
  ASSERT_EQ(got.drift.size(), want.drift.size());
  for (size_t l = 0; l < want.drift.size(); ++l)
    for (size_t t = 0; t < want.drift[l].size(); ++t) {
      if (std::isnan(want.drift[l][t]))
        EXPECT_TRUE(std::isnan(got.drift[l][t])) << l << "," << t;
      else
        EXPECT_DOUBLE_EQ(got.drift[l][t], want.drift[l][t]) << l << "," << t;
    }
  EXPECT_EQ(got.counts, want.counts);
  ASSERT_EQ(got.summary.size(), want.summary.size());
  for (size_t l = 0; l < want.summary.size(); ++l) {
    EXPECT_DOUBLE_EQ(got.summary[l].plateau, want.summary[l].plateau) << l;
    EXPECT_EQ(got.summary[l].stepsTo90, want.summary[l].stepsTo90) << l;
  }
}

TEST(StoredAnalyses, DriftAndDiscrepancyComeBackFromTheStoreAsTheyWere) {
  const std::string dir = test::scratchDir("stored-analyses");
  ExperimentStore store(dir + "/runs.db");
  const ActivationDriftResult drift = driftOfThreeLayers();
  const HessianStudyResult study = studyOfThreeModules();

  RunStart start;
  start.kind = "compress";
  const int64_t id = store.beginRun(start);
  RunResults results;
  addResultsFromJson(results, {{"perplexity", 12.5},
                               {"drift", storedDriftJson(drift)},
                               {"discrepancy", storedDiscrepancyJson(study)}});
  store.finishRun(id, results);

  const RunDetails run = store.run(id);
  const auto d = storedDrift(run);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->layers, 3);
  EXPECT_EQ(d->steps, 4);
  EXPECT_EQ(d->prompts, 5);
  expectSameCurves(d->free, drift.free);
  expectSameCurves(d->forced, drift.forced);

  const auto s = storedDiscrepancy(run);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->modules.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s->modules[i].name, study.modules[i].name);
    EXPECT_EQ(s->modules[i].columns, study.modules[i].columns);
    EXPECT_DOUBLE_EQ(s->modules[i].text.delta, study.modules[i].text.delta);
    EXPECT_DOUBLE_EQ(s->modules[i].decode.delta, study.modules[i].decode.delta);
  }
  EXPECT_EQ(s->summary.modules, 3);
  EXPECT_NEAR(s->summary.fractionDecodeSmaller, 2.0 / 3.0, 1e-12);   // q_proj and up_proj
}

TEST(StoredAnalyses, ARunThatStoredNoCurvesHasNone) {
  RunDetails run;
  run.metrics = {{"perplexity", 12.5}, {"drift_plateau_max", 0.4}};
  EXPECT_FALSE(storedDrift(run));
  EXPECT_FALSE(storedDiscrepancy(run));
}

}  // namespace
}  // namespace pareto

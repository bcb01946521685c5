// The export job both front ends run (core/jobs/ExportJob.h): its kinds, the report it prints, and a cancel that
// leaves the destination as it was (absent, or the earlier export that --overwrite would have replaced).
#include <gtest/gtest.h>

#include <filesystem>

#include "FolderContents.h"
#include "SharedData.h"
#include "jobs/ExportJob.h"
#include "util/Error.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;

TEST(ExportJob, KindsAreTheCliSubcommands) {
  for (ExportKind k : {ExportKind::HuggingFace, ExportKind::Gguf, ExportKind::CompressedTensors})
    EXPECT_EQ(parseExportKind(exportKindName(k)), k);
  EXPECT_EQ(exportKindName(ExportKind::CompressedTensors), "compressed-tensors");
  EXPECT_THROW(parseExportKind("onnx"), InputError);
}

TEST(ExportJob, WritesTheExportAndACancelLeavesTheDestinationAsItWas) {
  PARETO_REQUIRE_SHARED();
  const std::string dir = test::scratchDir("jobs-export");
  ExportOptions o;
  o.kind = ExportKind::Gguf;
  o.modelDir = test::sharedPath("models/ref-tiny");   // GGUF takes a dense folder too
  o.out = dir + "/tiny.gguf";
  o.type = "f16";
  ExportJob job(o);
  int updates = 0;
  job.run([&](const ProgressUpdate&) { ++updates; }, CancelToken());
  EXPECT_GT(updates, 10);
  ASSERT_TRUE(job.report().gguf.has_value());
  EXPECT_FALSE(job.report().hf || job.report().compressedTensors);
  EXPECT_EQ(job.result()["out"], job.report().gguf->outFile);
  EXPECT_EQ(job.result()["bytes"].get<uint64_t>(), fs::file_size(o.out));
  EXPECT_EQ(job.summary().rfind("wrote " + job.report().gguf->outFile + " (llama)", 0), 0u) << job.summary();
  const std::string earlier = test::fileText(o.out);
  const std::vector<std::string> listing = test::entries(dir);

  // Cancelled a few tensors into writing a replacement: the earlier file stays, nothing is left beside it.
  ExportOptions again = o;
  again.type = "q8_0";
  again.overwrite = true;
  CancelToken cancel;
  int seen = 0;
  EXPECT_THROW(ExportJob(again).run(
                   [&](const ProgressUpdate& u) {
                     if (u.stage == "write" && ++seen == 5) cancel.cancel();
                   },
                   cancel),
               Cancelled);
  EXPECT_EQ(seen, 5);
  EXPECT_EQ(test::fileText(o.out), earlier);
  EXPECT_EQ(test::entries(dir), listing);

  // A fresh destination: nothing under its name.
  ExportOptions fresh = again;
  fresh.out = dir + "/fresh.gguf";
  fresh.overwrite = false;
  CancelToken stop;
  stop.cancel();
  EXPECT_THROW(ExportJob(fresh).run({}, stop), Cancelled);
  EXPECT_FALSE(fs::exists(fresh.out));
  EXPECT_EQ(test::entries(dir), listing);
}

}  // namespace
}  // namespace pareto

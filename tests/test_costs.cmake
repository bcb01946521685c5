# Read by ctest, not by CMake (tests/CMakeLists.txt adds it to each test directory's CTestTestfile, after the
# tests are defined). ctest -j starts the tests of highest COST first, but it only learns each test's time from
# a run in the same build folder (Testing/Temporary/CTestCostData.txt): on a fresh checkout, as on CI, every test
# costs 0 and they start in the order they are defined, so a test of minutes could start last and run alone at the
# end. These are the long ones' seconds on CI's 2 cores; once ctest has timed a test itself, its own figure wins.
# A name that does not exist (yet, in this directory, or any more) is ignored: keep the list to the slow tests.
set(_pareto_test_costs
  [=[CompressBudget.ASynthetic1BCompressesOnTheCpuUnderAHostBudget]=] 130
  [=[GgufLlamaCpp.LlamaCppScoresTheExportAsParetoScoresTheSameWeights]=] 70
  [=[GgufLlamaCpp.FoldersCompressedToGgufGridsScoreInLlamaCppAsInPareto]=] 65
  [=[ModulePlan.EveryShippedRecipeIsEstimatedAsCompressWritesIt]=] 58
  [=[DecodeSampling.DrawsFromTheTopKAndTopPDistributionAndIsSeeded]=] 43
  [=[CliSafety.AKilledCompressResumesToTheSameWeights]=] 34
  [=[FrontEnds.OneRecipeGivesTheSameMetricsFromTheCliAndTheWorkbench]=] 31
  [=[StoreCli.AFinalWriteThatCannotGetTheLockFailsTheCommand]=] 6
  [=[RefModels/GoldenModel.HeldoutProsePerplexity/"ref-small"]=] 23
  [=[RecipeEstimate.EqualsWhatTheCompressJobWrites]=] 18
  [=[SearchCli.SearchedRecipeCompressesToThePredictedBitsWithinTheBudget]=] 15
  [=[StoreCli.JobsRecordThemselvesAndRunsReadsThem]=] 14
  [=[SearchCli.PredictionsUseTheStoredCopyBandwidthWithItsDate]=] 14
  [=[CompressJob.QuantizedFormatsLoadBackExactlyAndCountTheirBytes]=] 12
  [=[SearchCli.TheEstimateIsRecordedAndATableIsReusedOnlyForTheSameInputs]=] 11
  [=[SearchSensitivity.FewerBitsEstimateMoreLossOnEveryModuleOfRefTiny]=] 11
  [=[SearchRefinement.AModuleWhoseOutputErrorUnderstatesItsHarmGetsALargerScale]=] 11
  [=[RefModels/GoldenModel.HeldoutProsePerplexity/"ref-tiny"]=] 10
  [=[SearchRefinement.ScalesArePositiveDeterministicAndLeaveTheModelDense]=] 10
  [=[DistributedCompress.TwoProcessesGiveTheModelOneGives]=] 9
  [=[ContinuationsRecipe.GeneratedElsewhereCompressesAsGeneratedHere]=] 9
  [=[CliSafety.LostWritesFailTheCommand]=] 8
  [=[GgufGptq.BeatsRoundToNearestOnTheWeightedErrorOfARealLayer]=] 8
  [=[CliSafety.OverwriteNeverDeletesTheUsersFiles]=] 8
  [=[HostileJson.MillionsOfObjectsParseInLinearTime]=] 8
  [=[StoreCli.RunsLabelSetsATagAndANoteThatRunsShows]=] 8
  [=[CompressBudget.ActivationsInAScratchFileGiveTheSameWeights]=] 7
  [=[CompressedFolders.DecodeRuntimeContinuesLikeGenerateOnTheCpu]=] 7
)
while(_pareto_test_costs)
  list(POP_FRONT _pareto_test_costs _pareto_name _pareto_cost)
  set_tests_properties("${_pareto_name}" PROPERTIES COST ${_pareto_cost})
endwhile()

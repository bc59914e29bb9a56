# Read by ctest after the discovered scenarios of greyhound_integration_tests (TEST_INCLUDE_FILES): each
# one's claim (greyhound_gtest's CORES LATER) and the COSTs that differ from their default (40). A name
# here that no longer exists is an error ctest reports, so this list follows the tests.

# Two clusters at once (with and without greyhound, side by side; or two jobs): twice the others' claim
# (greyhound_cluster_cores: cluster_cores.cmake, written at configure time).
math(EXPR two_clusters_cores "2 * ${greyhound_cluster_cores}")
set(two_clusters
  FailSlows.ACpuContendedHostIsAHostStragglerAndGetsS2
  FailSlows.ACongestedLinkGetsS3AppliedItPaysAndItIsRevertedAfterTheLinkRecovers
  FaultMatrix.AStalledAgentWithOverflowingRingsAndASteppedMasterClockLeaveTheJobClockRight
  FaultMatrix.AFullShmDirectoryLeavesTheJobRunningCorrectAndAtItsSpeed
  FaultMatrix.AMasterKilledRightAfterPublishingAPlanLeavesItAppliedAndTheRestartedMasterRevertsIt
  FaultTolerance.RestartsOfRedisMasterAndAgentNeitherHarmTheJobNorLoseEvents
  MultiJob.OneMasterServesTwoJobsAndOpensAnIncidentOnlyInTheSlowOne)
# A cluster and a Redis kept busy (back-to-back scripts: a core of its own for 8 s).
set(busy_redis FaultTolerance.ARedisStoppedThenBusyNeitherSlowsAMitigatedJobNorOpensAnIncident)
math(EXPR busy_redis_cores "${greyhound_cluster_cores} + 100")
set(one_cluster ${greyhound_integration_tests_TESTS})
list(REMOVE_ITEM one_cluster ${two_clusters} ${busy_redis})
set_tests_properties(${one_cluster} PROPERTIES RESOURCE_GROUPS cores:${greyhound_cluster_cores})
set_tests_properties(${two_clusters} PROPERTIES RESOURCE_GROUPS cores:${two_clusters_cores})
set_tests_properties(${busy_redis} PROPERTIES RESOURCE_GROUPS cores:${busy_redis_cores})

# The longest first (seconds on two cores, alone).
set_tests_properties(FailSlows.ACongestedLinkGetsS3AppliedItPaysAndItIsRevertedAfterTheLinkRecovers PROPERTIES COST 80)
set_tests_properties(
  FailSlows.S4RestartsTheJobWithoutTheSlowNodeFromItsCheckpointWithTheSameGlobalBatch
  Validation.AMasterKilledDuringAPauseLeavesEveryRankResumingByItself
  Validation.AnAgentKilledDuringAPauseLeavesItsRanksResumingByThemselves
  Validation.RedisStoppedDuringAPauseLeavesEveryRankResumingByItself
  PROPERTIES COST 70)
set_tests_properties(
  Validation.ASlowGpuAndASlowLinkAtOnceAreBothNamed
  Validation.ACongestedLinkIsNamedByItsTransfers
  FailSlows.ASplitForASlowGpuRevertsSoonAfterItRecoversWhileAnOverlappingLinkStaysOpen
  FailSlows.ACpuContendedHostIsAHostStragglerAndGetsS2
  Validation.ARankThatNeverReachesTheCutAbortsThePauseForAll
  Validation.ASlowGpuIsNamedByItsGemm
  Mitigation.SlowGpuIsLocalisedRebalancedAndRevertedAfterRecovery
  Mitigation.AMasterRestartedMidIncidentResumesFromTheLayoutAndReverts
  Mitigation.AStandbyMasterTakesOverFromAKilledLeaderMidIncidentAndLosesNothing
  FaultMatrix.AStalledAgentWithOverflowingRingsAndASteppedMasterClockLeaveTheJobClockRight
  FaultMatrix.AMasterKilledRightAfterPublishingAPlanLeavesItAppliedAndTheRestartedMasterRevertsIt
  FaultTolerance.RestartsOfRedisMasterAndAgentNeitherHarmTheJobNorLoseEvents
  PROPERTIES COST 55)

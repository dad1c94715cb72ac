// dltune's library API in one include, without LibTorch: specs and spaces, the ask/tell study session, the store
// and its exports, the analyses, the report and the runner. A workload of your own (torch) includes
// dltune/workloads/registry.h besides; docs/architecture.md says what each module offers.
#pragma once

#include "dltune/analyze/analysis.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/core/error.h"
#include "dltune/core/hyperparams.h"
#include "dltune/core/objective.h"
#include "dltune/core/training_settings.h"
#include "dltune/core/value.h"
#include "dltune/report/dashboard_api.h"
#include "dltune/report/html_report.h"
#include "dltune/report/study_data.h"
#include "dltune/report/study_page.h"
#include "dltune/run/study_report.h"
#include "dltune/run/study_session.h"
#include "dltune/run/trial_setup.h"
#include "dltune/run/worker.h"
#include "dltune/search/sampler.h"
#include "dltune/space/search_space.h"
#include "dltune/store/export.h"
#include "dltune/store/store.h"
#include "dltune/store/tracking.h"
#include "dltune/study/study_spec.h"
#include "dltune/train/trainer.h"
#include "dltune/version.h"
#include "dltune/workloads/train.h"

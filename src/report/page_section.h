// A section of the study page and its charts (study_page.h builds them in page order; a section of its own, such as
// pareto_section.h, builds one without including the page).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dltune {

struct PageChart {
  std::string id;       // stable within the page: "isolation_<param>", "curves_valid_loss", "best_steps", ...
  std::string caption;  // what the chart shows, under it
  nlohmann::json spec;  // Vega-Lite
  bool wide = false;    // spans the page's width
};

struct PageSection {
  std::string id;    // the HTML anchor: "variance", "parent", "isolation", "axis-plots", "curves", "best-steps",
                     // "gradients", "enough", "pareto", "time", ...
  int position = 0;  // its place on the whole page (0 first), also when asked for in parts
  std::string title;
  std::string explanation;  // what to look for, in the playbook's terms
  std::string empty_text;   // shown instead of charts when there are none
  std::vector<PageChart> charts;
  std::string more_title;  // a second, smaller group of charts below the first ("Other evaluations (3)"), if any
  std::vector<PageChart> more_charts;
  std::string folded_title;  // a third group, folded away until opened ("Per-class correct examples (10)"), if any
  std::vector<PageChart> folded_charts;
};

}  // namespace dltune

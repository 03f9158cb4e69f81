// The metric series attnscope-server registers, for the tests that check
// that configuration (dashboard, alerts, autoscaler rules) names only those.
#pragma once

#include <map>
#include <string>

namespace attnscope::metrics::testing {

// Every series name a query may use, mapped to its family: counters and
// gauges by family name, histograms by their _bucket, _sum and _count series.
std::map<std::string, std::string> RegisteredSeries();

// The type ("counter", "gauge", "histogram", ...) of each registered family.
std::map<std::string, std::string> RegisteredFamilyTypes();

}  // namespace attnscope::metrics::testing

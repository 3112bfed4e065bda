// Helpers shared by the topology sources and printers.
#pragma once

#include <string>
#include <string_view>

namespace stallscope::topo {

// "0000:17:00.0": the one spelling of a PCI address inside stallscope.
std::string format_bus_id(unsigned domain, unsigned bus, unsigned dev, unsigned func);
// Normalizes NVML's "00000000:17:00.0" and any case to format_bus_id's form;
// returns the input unchanged when it is no PCI address.
std::string normalize_bus_id(std::string_view id);

}  // namespace stallscope::topo

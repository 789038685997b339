/* SPDX-License-Identifier: Apache-2.0 */
#include "gauge.h"

atomic_long gauge_connections;
atomic_long gauge_streams;
atomic_long gauge_max_streams;
atomic_long gauge_peak_streams;
atomic_long gauge_client_backlog;
atomic_ullong gauge_body_bytes;
atomic_ullong gauge_body_spills;
atomic_ulong gauge_unmeasured[METER_UNMEASURED_COUNT];
atomic_ullong gauge_read_times[2];
atomic_ullong gauge_clock_steps;
atomic_ullong gauge_probes[GAUGE_PROBE_COUNT];

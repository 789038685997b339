/* SPDX-License-Identifier: Apache-2.0 */
#include "sample.h"

#include <math.h>
#include <string.h>

/* s cut to cap - 1 bytes into the zeroed dst, as snprintf would. */
static void key_part(char *dst, size_t cap, const char *s)
{
	memcpy(dst, s, strnlen(s, cap - 1));
}

void sample_key_set(struct sample_key *k, const char *route, const char *tenant,
    const char *model, size_t model_len)
{
	memset(k, 0, sizeof *k);
	k->mint = SAMPLE_MINT_TENANT | SAMPLE_MINT_MODEL;
	key_part(k->route, sizeof k->route, route ? route : "-");
	key_part(k->tenant, sizeof k->tenant, tenant ? tenant : "-");
	k->upstream[0] = '-';       /* none; the exchange names its replica */
	if (model_len >= sizeof k->model)
		model_len = sizeof k->model - 1;
	memcpy(k->model, model, model_len);
	k->model[model_len] = '\0';
}

/* Stream health: the stalls the sweep did not report live, the proxy's
 * own overhead, clumping. */
static void fill_health(struct sample *s, const struct meter *m,
    const struct vitals *v)
{
	int buffered = meter_buffered(m);

	s->no_token = (uint8_t)meter_no_token(m, (enum meter_outcome)s->outcome);
	s->judged = buffered >= 0;
	s->buffered = buffered > 0;
	/* the loop's clock doubts every time (there is no stamp to trust),
	 * and so does a TLS read OpenSSL kept part of: only the kernel's
	 * stamps of whole reads tell a saturated worker */
	s->ttft_doubt_us = meter_ttft_doubt_us(m);
	s->ttft_stamped = s->ttft_doubt_us >= 0 && m->ft_kernel && m->ft_whole;
	s->ttft_uncertain = s->ttft_stamped && s->ttft_doubt_us > SAMPLE_UNCERTAIN_US;
	s->stalls = m->stalls - (v != NULL && v->stalls_live <= m->stalls ?
	    v->stalls_live : m->stalls);
	s->ovh_request_us = v != NULL ? v->ovh_request_us : -1;
	s->ovh_read_sum_us = v != NULL ? v->ovh_read_sum_us : 0;
	if (v != NULL)
		memcpy(s->ovh_read, v->ovh_read_hist, sizeof s->ovh_read);
	else
		memset(s->ovh_read, 0, sizeof s->ovh_read);
}

void sample_fill(struct sample *s, const struct meter *m, const struct vitals *v,
    enum meter_outcome outcome, unsigned status, unsigned exceeded,
    long concurrency)
{
	int64_t out = meter_output_tokens(m);
	double speed = meter_speed_tokens(m);

	s->outcome = (uint8_t)outcome;
	s->exceeded = (uint8_t)exceeded;
	s->status = (uint16_t)status;
	s->t_us = m->t_end;
	s->ttft_us = meter_ttft_us(m);
	s->tpot_us = meter_tpot_us(m);
	s->ttfo_us = meter_ttfo_us(m);
	s->duration_us = m->t_end > m->t0 ? (int64_t)(m->t_end - m->t0) : 0;
	s->ttft_server_us = meter_ttft_server_us(m);
	s->ttfo_server_us = meter_ttfo_server_us(m);
	s->duration_server_us = meter_duration_server_us(m);
	s->ttfc_us = !m->stream || m->t_first_token == 0 || m->t_sent == 0 ? -1 :
	    m->t_first_token > m->t_sent ? (int64_t)(m->t_first_token - m->t_sent) : 0;
	s->connect_us = m->t_conn && !m->conn_reused && m->t_conn >= m->t_req && m->t_req ?
	    (int64_t)(m->t_conn - m->t_req) : -1;
	s->output_tokens = out;
	s->input_tokens = meter_input_tokens(m);
	/* a stream its client held back went at the client's pace; the
	 * tokens after the first event's, as TPOT counts them */
	s->speed_tokens = speed > 0 && m->t_last_token > m->t_first_token &&
	    !meter_client_paced(m) ? (uint64_t)llround(speed) : 0;
	s->speed_us = s->speed_tokens ? m->t_last_token - m->t_first_token : 0;
	s->concurrency = concurrency;
	s->token_source = (uint8_t)meter_token_source(m);
	s->tpot_estimated = (uint8_t)meter_tpot_estimated(m);
	s->token_events = m->token_events;
	s->first_event_tokens = m->first_event_tokens;
	meter_wire(m, &s->wire);
	fill_health(s, m, v);
}

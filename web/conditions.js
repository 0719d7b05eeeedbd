// The conditions the console flags during a sale, named after the Prometheus alerts
// (infra/prometheus/seckill.rules.yml) that watch the same numbers with the same thresholds:
// this object is the console's one copy of them (tests/browser/run.mjs holds it against the
// rules). The console sees what the admin API shows, so two alerts are approximated or left
// to Prometheus, as their notes say.
'use strict';

const CONDITIONS = {
  // Accepted orders not yet landed in Postgres, now.
  SeckillQueueBacklog: {queuedAbove: 10000},
  // Orders landed / (landed + dead letters) over the chart's window, when any landed or failed.
  SeckillLandingFailing: {landedRatioBelow: 0.99},
  // Dead letters added within the chart's window.
  SeckillDeadLetters: {deadLettersAddedAbove: 0},
  // The console cannot see Redis's CPU: a Redis round trip slower than this
  // (GET /admin/health) stands in for it.
  SeckillRedisCpuHigh: {redisLatencyMsAbove: 50},
  // Shed requests are a host metric: only Prometheus sees them.
  SeckillShedding: null,
  SeckillCriticalShed: null,
  // The provider's events are counted in Postgres, exported by GET /admin/metrics.
  SeckillProviderLivemodeMismatch: null,
};

/**
 * What each condition says now, from the chart's samples (oldest first: {queued, drained,
 * dead}) and the latest health report (or null): [{alert, flagged, detail}] in CONDITIONS'
 * order, `flagged` null where the console cannot tell.
 */
function evaluateConditions(samples, health) {
  const first = samples[0], last = samples[samples.length - 1];
  const c = CONDITIONS;
  const landed = last.drained - first.drained, dead = last.dead - first.dead;
  const ratio = landed + dead > 0 ? landed / (landed + dead) : null;
  const latency = health && health.redis ? health.redis.latency_ms : null;
  const redisDown = !!health && !!health.redis && !health.redis.ok;
  return [
    {alert: 'SeckillQueueBacklog', flagged: last.queued > c.SeckillQueueBacklog.queuedAbove,
      detail: `${fmt(last.queued)} queued (flagged above ${fmt(c.SeckillQueueBacklog.queuedAbove)})`},
    {alert: 'SeckillLandingFailing', flagged: ratio !== null && ratio < c.SeckillLandingFailing.landedRatioBelow,
      detail: ratio === null ? 'nothing landed or failed in the window'
        : `${(ratio * 100).toFixed(1)} % landed in the window: ${fmt(landed)} landed, ${fmt(dead)} dead letters (flagged below ${c.SeckillLandingFailing.landedRatioBelow * 100} %)`},
    {alert: 'SeckillDeadLetters', flagged: dead > c.SeckillDeadLetters.deadLettersAddedAbove,
      detail: `${fmt(dead)} new in the window, ${fmt(last.dead)} in all`},
    {alert: 'SeckillRedisCpuHigh', flagged: latency === null ? null : redisDown || latency > c.SeckillRedisCpuHigh.redisLatencyMsAbove,
      detail: latency === null ? 'no health report yet'
        : `${redisDown ? 'Redis does not answer' : `Redis answers in ${fmt(latency)} ms`}: the console cannot see CPU, so latency stands in (flagged above ${c.SeckillRedisCpuHigh.redisLatencyMsAbove} ms)`},
    {alert: 'SeckillShedding', flagged: null, detail: 'shed requests are a host metric: see Prometheus'},
    {alert: 'SeckillCriticalShed', flagged: null, detail: 'shed requests are a host metric: see Prometheus'},
    {alert: 'SeckillProviderLivemodeMismatch', flagged: null, detail: "the provider's events are counted in Postgres: see Prometheus"},
  ];
}

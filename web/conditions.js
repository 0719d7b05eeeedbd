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
      detail: t('conditions.backlog', {queued: last.queued, above: c.SeckillQueueBacklog.queuedAbove})},
    {alert: 'SeckillLandingFailing', flagged: ratio !== null && ratio < c.SeckillLandingFailing.landedRatioBelow,
      detail: ratio === null ? t('conditions.landingNone')
        : t('conditions.landing', {percent: (ratio * 100).toFixed(1), landed, dead, below: c.SeckillLandingFailing.landedRatioBelow * 100})},
    {alert: 'SeckillDeadLetters', flagged: dead > c.SeckillDeadLetters.deadLettersAddedAbove,
      detail: t('conditions.dead', {added: dead, all: last.dead})},
    {alert: 'SeckillRedisCpuHigh', flagged: latency === null ? null : redisDown || latency > c.SeckillRedisCpuHigh.redisLatencyMsAbove,
      detail: latency === null ? t('conditions.redisUnread')
        : redisDown ? t('conditions.redisDown', {above: c.SeckillRedisCpuHigh.redisLatencyMsAbove})
          : t('conditions.redis', {ms: latency, above: c.SeckillRedisCpuHigh.redisLatencyMsAbove})},
    {alert: 'SeckillShedding', flagged: null, detail: t('conditions.shedHere')},
    {alert: 'SeckillCriticalShed', flagged: null, detail: t('conditions.shedHere')},
    {alert: 'SeckillProviderLivemodeMismatch', flagged: null, detail: t('conditions.providerHere')},
  ];
}

# CloudFront in front of the load balancer (var.cdn). Reads are most of a sale's traffic: the
# shop's pages and `GET /shop/events/{id}` are cached for as long as the app's Cache-Control says
# (about a second for an event, with stale-while-revalidate and a strong ETag; CloudFront
# revalidates with If-None-Match and the app answers 304), so one origin request per edge and
# second serves every buyer refreshing there. Their cache key holds the path and only the query
# parameters those routes read (none: a random `?x=` neither splits the cache nor reaches the
# origin). The API, admin and console pass through uncached with every viewer header
# (Authorization included), query string and cookie.
#
# The client's address: CloudFront appends the viewer's address to X-Forwarded-For, and the load
# balancer passes the header on unchanged (xff_header_processing_mode "preserve" with the CDN,
# app.tf). The app trusts X-Forwarded-For from the load balancer's subnets only (trusted_proxies,
# spin.tf), so it takes the right-most entry, the one CloudFront wrote. That holds because only
# this distribution reaches the load balancer: its security group admits CloudFront's
# origin-facing prefix list alone (security.tf), and its listener forwards only requests that
# carry X-Seckill-Origin = cdn_origin_secret (below), which viewers never see.

locals {
  cloudfront_prefix_list_id = var.cloudfront_prefix_list_id != null ? var.cloudfront_prefix_list_id : one(data.aws_ec2_managed_prefix_list.cloudfront[*].id)
  # CloudFront reaches the load balancer over HTTPS by a name its certificate covers, or over
  # plain HTTP by its own name when plain HTTP is allowed.
  cdn_origin_domain = local.https ? var.cdn_origin_domain_name : aws_lb.app.dns_name
  cdn_origin_header = "X-Seckill-Origin"
  cdn_origin_id     = "alb"
  # AWS-managed policies: no caching; every viewer header but Host (CloudFront then sends the
  # origin's name, which its certificate check needs), every query string and cookie.
  caching_disabled_policy_id       = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
  all_viewer_except_host_policy_id = "b689b0a8-53d0-40ab-baf2-68738e2966ac"
  cdn_all_methods                  = ["GET", "HEAD", "OPTIONS", "PUT", "POST", "PATCH", "DELETE"]
  cdn_cached_methods               = ["GET", "HEAD"]
  cdn_passthrough_paths            = ["/api/*", "/admin/*", "/console*", "/shop/demo-login"]
  cdn_cached_paths                 = ["/shop/events/*", "/shop", "/shop/*"]
  # The query parameters the cached routes read (the web component's GET and HEAD of /shop/...:
  # none; the storefront's own `?event=` and `?checkout=` are read by its script in the browser),
  # the only ones in their cache key and forwarded to the origin. tests/terraform/check_roots.py
  # holds this list to the components' sources.
  cdn_cached_query_parameters = []
}

data "aws_ec2_managed_prefix_list" "cloudfront" {
  count = var.cdn && var.cloudfront_prefix_list_id == null ? 1 : 0
  name  = "com.amazonaws.global.cloudfront.origin-facing"
}

# The shop's reads: cached exactly as the origin's Cache-Control says (no header, not cached);
# the key is the path and the query parameters those routes read, nothing a viewer sends besides.
resource "aws_cloudfront_cache_policy" "origin_cache_control" {
  count       = var.cdn ? 1 : 0
  name        = "${var.name}-origin-cache-control"
  comment     = "seckill shop reads: the origin's Cache-Control decides"
  min_ttl     = 0
  default_ttl = 0
  max_ttl     = 31536000

  parameters_in_cache_key_and_forwarded_to_origin {
    enable_accept_encoding_gzip   = true
    enable_accept_encoding_brotli = true
    cookies_config {
      cookie_behavior = "none"
    }
    headers_config {
      header_behavior = "none"
    }
    query_strings_config {
      query_string_behavior = length(local.cdn_cached_query_parameters) > 0 ? "whitelist" : "none"
      dynamic "query_strings" {
        for_each = length(local.cdn_cached_query_parameters) > 0 ? [1] : []
        content {
          items = local.cdn_cached_query_parameters
        }
      }
    }
  }
}

resource "aws_cloudfront_distribution" "app" {
  count           = var.cdn ? 1 : 0
  enabled         = true
  is_ipv6_enabled = true
  comment         = "${var.name}: the shop's reads cached, the API and admin passed through"
  aliases         = var.cdn_aliases
  price_class     = var.cdn_price_class
  http_version    = "http2and3"
  # A WAFv2 web ACL (scope CLOUDFRONT): its rules see the viewer's own address, the one to rate
  # limit the public critical routes by (DEPLOY.md, "At overload").
  web_acl_id = var.web_acl_arn

  origin {
    origin_id   = local.cdn_origin_id
    domain_name = local.cdn_origin_domain

    custom_origin_config {
      http_port                = 80
      https_port               = 443
      origin_protocol_policy   = local.https ? "https-only" : "http-only"
      origin_ssl_protocols     = ["TLSv1.2"]
      origin_read_timeout      = 60
      origin_keepalive_timeout = 60
    }

    custom_header {
      name  = local.cdn_origin_header
      value = var.cdn_origin_secret
    }
  }

  # Everything not named below (well-known routes, anything new): passed through, uncached.
  default_cache_behavior {
    target_origin_id         = local.cdn_origin_id
    viewer_protocol_policy   = "redirect-to-https"
    allowed_methods          = local.cdn_all_methods
    cached_methods           = local.cdn_cached_methods
    cache_policy_id          = local.caching_disabled_policy_id
    origin_request_policy_id = local.all_viewer_except_host_policy_id
    compress                 = true
  }

  dynamic "ordered_cache_behavior" {
    for_each = local.cdn_passthrough_paths
    content {
      path_pattern             = ordered_cache_behavior.value
      target_origin_id         = local.cdn_origin_id
      viewer_protocol_policy   = "redirect-to-https"
      allowed_methods          = local.cdn_all_methods
      cached_methods           = local.cdn_cached_methods
      cache_policy_id          = local.caching_disabled_policy_id
      origin_request_policy_id = local.all_viewer_except_host_policy_id
      compress                 = true
    }
  }

  dynamic "ordered_cache_behavior" {
    for_each = local.cdn_cached_paths
    content {
      path_pattern           = ordered_cache_behavior.value
      target_origin_id       = local.cdn_origin_id
      viewer_protocol_policy = "redirect-to-https"
      allowed_methods        = ["GET", "HEAD"]
      cached_methods         = local.cdn_cached_methods
      cache_policy_id        = aws_cloudfront_cache_policy.origin_cache_control[0].id
      compress               = true
    }
  }

  restrictions {
    geo_restriction {
      restriction_type = "none"
    }
  }

  viewer_certificate {
    cloudfront_default_certificate = var.cdn_certificate_arn == null
    acm_certificate_arn            = var.cdn_certificate_arn
    ssl_support_method             = var.cdn_certificate_arn == null ? null : "sni-only"
    minimum_protocol_version       = var.cdn_certificate_arn == null ? "TLSv1" : "TLSv1.2_2021"
  }

  lifecycle {
    precondition {
      condition     = !local.https || var.cdn_origin_domain_name != null
      error_message = "cdn with certificate_arn needs cdn_origin_domain_name: a name the certificate covers that resolves to the load balancer (CloudFront checks the origin's certificate against it)."
    }
    precondition {
      condition     = length(var.operator_cidrs) == 0
      error_message = "operator_cidrs is enforced by the load balancer's rules on the client's address, which behind CloudFront is CloudFront's: set cdn = false to keep operator_cidrs, or leave /admin/* and /console to the operators' tokens."
    }
  }
}

# The load balancer's side of the origin secret: the rules that forward the app's routes require
# it (app.tf); CloudFront's requests for any other path get this rule's 404, and requests without
# it the listener's default answer, 403.
resource "aws_lb_listener_rule" "from_cdn" {
  count        = var.cdn ? 1 : 0
  listener_arn = local.app_listener_arn
  priority     = local.lb_priority.cdn

  action {
    type = "fixed-response"
    fixed_response {
      content_type = "application/json"
      status_code  = "404"
      message_body = local.not_found
    }
  }
  condition {
    http_header {
      http_header_name = local.cdn_origin_header
      values           = [var.cdn_origin_secret]
    }
  }
}

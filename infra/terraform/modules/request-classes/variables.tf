variable "manifest" {
  description = "The text of the Spin manifest the app runs (spin.toml or spin.http.toml): its [[trigger.http]] routes and its [application.tool.seckill.request_classes] table."
  type        = string
}

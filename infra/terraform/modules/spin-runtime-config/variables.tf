variable "manifest" {
  description = "The text of the Spin manifest the app runs (spin.toml or spin.http.toml): its [variables] give the names and defaults."
  type        = string
}

variable "values" {
  description = "Values by variable name (secrets, hosts, overrides); they win over the manifest's defaults."
  type        = map(string)
  default     = {}
  sensitive   = true
  validation {
    condition     = alltrue([for k in keys(var.values) : can(regex("^[a-z][a-z0-9_]*$", k))])
    error_message = "Variable names are lower_snake_case, as Spin requires."
  }
}

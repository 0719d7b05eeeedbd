# RDS PostgreSQL, the orders' system of record: private subnets only, encrypted storage,
# Multi-AZ (a synchronous standby), and TLS forced by the parameter group (rds.force_ssl = 1:
# a connection without TLS is refused). The app connects with sslmode=require, which real Spin
# verifies like verify-full; the instances trust the RDS CA through their system store (app.tf).

locals {
  postgres_major = split(".", var.postgres_engine_version)[0]
}

resource "aws_db_subnet_group" "postgres" {
  name_prefix = "${var.name}-postgres-"
  subnet_ids  = [for s in aws_subnet.private : s.id]
  lifecycle { create_before_destroy = true }
}

resource "aws_db_parameter_group" "postgres" {
  name_prefix = "${var.name}-postgres${local.postgres_major}-"
  family      = "postgres${local.postgres_major}"
  description = "seckill: TLS only"

  parameter {
    name         = "rds.force_ssl"
    value        = "1"
    apply_method = "immediate"
  }

  lifecycle { create_before_destroy = true }
}

resource "aws_db_instance" "postgres" {
  identifier     = "${var.name}-postgres"
  engine         = "postgres"
  engine_version = var.postgres_engine_version
  instance_class = var.postgres_instance_class

  allocated_storage     = var.postgres_allocated_storage
  max_allocated_storage = var.postgres_max_allocated_storage
  storage_type          = "gp3"
  storage_encrypted     = true

  db_name  = var.postgres_database
  username = var.postgres_username
  password = var.postgres_password
  port     = var.postgres_port

  db_subnet_group_name   = aws_db_subnet_group.postgres.name
  vpc_security_group_ids = [aws_security_group.postgres.id]
  parameter_group_name   = aws_db_parameter_group.postgres.name
  publicly_accessible    = false
  multi_az               = var.postgres_multi_az
  ca_cert_identifier     = var.postgres_ca_cert_identifier

  backup_retention_period    = var.postgres_backup_retention_days
  copy_tags_to_snapshot      = true
  auto_minor_version_upgrade = true
  deletion_protection        = var.deletion_protection
  skip_final_snapshot        = !var.deletion_protection
  final_snapshot_identifier  = var.deletion_protection ? "${var.name}-postgres-final" : null
}

# A VPC over the given zones: public subnets for the ALB and the NAT gateway(s), private subnets
# for the instances, Redis and Postgres. Nothing in the private subnets has a public address.

locals {
  zones         = var.availability_zones != null ? var.availability_zones : ["${var.region}a", "${var.region}b"]
  zone_index    = { for i, z in local.zones : z => i }
  public_cidrs  = var.public_subnet_cidrs != null ? var.public_subnet_cidrs : [for i, z in local.zones : cidrsubnet(var.vpc_cidr, 8, i)]
  private_cidrs = var.private_subnet_cidrs != null ? var.private_subnet_cidrs : [for i, z in local.zones : cidrsubnet(var.vpc_cidr, 4, 8 + i)]
  # NAT: one, or one per zone (var.nat_gateways); zone i routes through NAT i mod nat_count.
  nat_count = var.nat_gateways == "per_zone" ? length(local.zones) : 1
}

resource "aws_vpc" "main" {
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = { Name = var.name }
}

resource "aws_internet_gateway" "main" {
  vpc_id = aws_vpc.main.id
  tags   = { Name = var.name }
}

resource "aws_subnet" "public" {
  for_each          = local.zone_index
  vpc_id            = aws_vpc.main.id
  availability_zone = each.key
  cidr_block        = local.public_cidrs[each.value]
  tags              = { Name = "${var.name}-public-${each.key}", Tier = "public" }
}

resource "aws_subnet" "private" {
  for_each          = local.zone_index
  vpc_id            = aws_vpc.main.id
  availability_zone = each.key
  cidr_block        = local.private_cidrs[each.value]
  tags              = { Name = "${var.name}-private-${each.key}", Tier = "private" }
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.main.id
  tags   = { Name = "${var.name}-public" }
}

resource "aws_route" "public_internet" {
  route_table_id         = aws_route_table.public.id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = aws_internet_gateway.main.id
}

resource "aws_route_table_association" "public" {
  for_each       = aws_subnet.public
  subnet_id      = each.value.id
  route_table_id = aws_route_table.public.id
}

resource "aws_eip" "nat" {
  count  = local.nat_count
  domain = "vpc"
  tags   = { Name = "${var.name}-nat-${count.index}" }
}

resource "aws_nat_gateway" "main" {
  count         = local.nat_count
  allocation_id = aws_eip.nat[count.index].id
  subnet_id     = aws_subnet.public[local.zones[count.index]].id
  tags          = { Name = "${var.name}-nat-${count.index}" }

  depends_on = [aws_internet_gateway.main]
}

resource "aws_route_table" "private" {
  for_each = local.zone_index
  vpc_id   = aws_vpc.main.id
  tags     = { Name = "${var.name}-private-${each.key}" }
}

resource "aws_route" "private_nat" {
  for_each               = local.zone_index
  route_table_id         = aws_route_table.private[each.key].id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.main[each.value % local.nat_count].id
}

resource "aws_route_table_association" "private" {
  for_each       = aws_subnet.private
  subnet_id      = each.value.id
  route_table_id = aws_route_table.private[each.key].id
}

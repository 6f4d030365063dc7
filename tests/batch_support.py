"""Submitting gpunode's AWS Batch files to a moto server as `aws ... --cli-input-json file://F` would: each file
loaded and handed to boto3's call unmodified. Shared by tests/test_batch_submit.py and the seed 004 page's test."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# The CLI's command of each file, in the order a user runs them (docs/seeds/004-aws-batch.md).
CALLS = (("ec2", "create-launch-template"), ("batch", "create-compute-environment"), ("batch", "create-job-queue"),
         ("batch", "register-job-definition"), ("batch", "submit-job"))


def client(endpoint: str, service: str):
    import boto3

    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def cli_input_json(endpoint: str, service: str, command: str, path: Path) -> dict[str, Any]:
    """`aws SERVICE COMMAND --cli-input-json file://PATH`: the file's JSON as the call's parameters, unmodified."""
    method = re.sub(r"-", "_", command)
    response = getattr(client(endpoint, service), method)(**json.loads(path.read_text()))
    response.pop("ResponseMetadata", None)
    return response


def user_network(endpoint: str) -> dict[str, str]:
    """What the seed's user has before gpunode (the guide's prerequisites): a VPC subnet, a security group, the ECS
    instance profile and the Batch service role, made in moto."""
    ec2, iam = client(endpoint, "ec2"), client(endpoint, "iam")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="batch-nodes", Description="Batch GPU nodes", VpcId=vpc)["GroupId"]
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                                 "Principal": {"Service": "ec2.amazonaws.com"}}]})
    iam.create_role(RoleName="ecsInstanceRole", AssumeRolePolicyDocument=trust)
    iam.create_instance_profile(InstanceProfileName="ecsInstanceRole")
    iam.add_role_to_instance_profile(InstanceProfileName="ecsInstanceRole", RoleName="ecsInstanceRole")
    service = iam.create_role(RoleName="AWSBatchServiceRole", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    return {"subnet": subnet, "security_group": group, "instance_role": "ecsInstanceRole", "service_role": service}


def network_options(network: dict[str, str]) -> list[str]:
    return ["--subnet", network["subnet"], "--security-group", network["security_group"],
            "--instance-role", network["instance_role"], "--service-role", network["service_role"]]


def submit_all(endpoint: str, files: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """The five calls in order (files keyed by command); returns each call's answer."""
    return {command: cli_input_json(endpoint, service, command, files[command]) for service, command in CALLS}


def listed_jobs(endpoint: str, queue: str) -> list[dict[str, Any]]:
    """Every job of the queue once, whatever its state.

    list-jobs answers one status at a time and the job moves on between the calls (moto runs it in a thread, as
    AWS does), so a job can be seen under two states; it is counted once, by its id.
    """
    batch = client(endpoint, "batch")
    states = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED")
    seen: dict[str, dict[str, Any]] = {}
    for state in states:
        for job in batch.list_jobs(jobQueue=queue, jobStatus=state)["jobSummaryList"]:
            seen.setdefault(job["jobId"], job)
    return list(seen.values())

"""Translates template.yaml as CloudFormation would, for both settings of
the orders capacity-provider switch (OrdersCapacityProviderArn empty and
set) and of the payments-api tenancy switch (PaymentsApiTenancy none and
per-tenant), and checks what each gives.

Run with the SAM CLI venv's python (.ci/run does): the AWS::LanguageExtensions
step is the SAM CLI's copy of it (samcli.lib.cfn_language_extensions), the
AWS::Serverless step the SAM translator itself
(samtranslator.translator.transform.transform). It also checks that the SAM
transform alone rejects the template's !If on CapacityProviderConfig: the
reason the template lists AWS::LanguageExtensions first.

Exits non-zero, naming the failed check, when one fails.
"""

import copy
import os
import sys

# The translator reads the Region for its pseudo parameters (no credentials).
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from samcli.lib.cfn_language_extensions.sam_integration import expand_language_extensions
from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

PROVIDER = "arn:aws:lambda:us-east-1:123456789012:capacity-provider:orders-lmi"
PARAMETERS = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::Partition": "aws",
    "AWS::StackName": "idempotent-handlers",
    "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/idempotent-handlers/1",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NotificationARNs": [],
}


class NoManagedPolicies:
    """The template names no managed policy by name: nothing to look up."""

    def load(self):
        return {}


def packaged(template):
    """The template as `sam package` uploads it: code on S3."""
    template = copy.deepcopy(template)
    for resource in template["Resources"].values():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://artifacts/code.zip"
    return template


def translated(template, overrides):
    parameters = dict(PARAMETERS, **overrides)
    expanded = expand_language_extensions(
        packaged(template), parameter_values=parameters, enabled=True
    )
    if not expanded.had_language_extensions:
        raise SystemExit("template.yaml does not use AWS::LanguageExtensions")
    sam = expanded.expanded_template
    transforms = sam.get("Transform")
    if isinstance(transforms, list):
        sam["Transform"] = [t for t in transforms if t != "AWS::LanguageExtensions"]
    return transform(sam, parameters, NoManagedPolicies())


def of_type(cfn, type_):
    return {k: r for k, r in cfn["Resources"].items() if r["Type"] == type_}


def check(ok, what):
    if not ok:
        raise SystemExit(f"translate_template: FAILED: {what}")
    print(f"translate_template: ok: {what}")


def main(path):
    with open(path, encoding="utf-8") as f:
        template = yaml_parse(f.read())

    off = translated(template, {})
    orders = off["Resources"]["OrdersFunction"]["Properties"]
    check("CapacityProviderConfig" not in orders, "off: orders has no capacity provider")
    check(orders.get("MemorySize") == 256, "off: orders keeps the Globals' 256 MB")
    check(
        not of_type(off, "AWS::Lambda::Alias"),
        "off: no alias (the SQS trigger invokes $LATEST)",
    )

    on = translated(template, {"OrdersCapacityProviderArn": PROVIDER})
    orders = on["Resources"]["OrdersFunction"]["Properties"]
    config = orders.get("CapacityProviderConfig", {}).get(
        "LambdaManagedInstancesCapacityProviderConfig", {}
    )
    check(config.get("CapacityProviderArn") == PROVIDER, "on: orders is on the capacity provider")
    check(
        config.get("PerExecutionEnvironmentMaxConcurrency") == 16,
        "on: 16 invocations at once per execution environment",
    )
    check(orders.get("MemorySize") == 2048, "on: orders has 2,048 MB")
    check("VpcConfig" not in orders, "on: no VpcConfig (the provider's VPC)")
    aliases = of_type(on, "AWS::Lambda::Alias")
    check(
        [a["Properties"]["Name"] for a in aliases.values()] == ["live"],
        "on: one alias, live, on a published version",
    )
    alias_id = next(iter(aliases))
    mappings = [
        m["Properties"]
        for m in of_type(on, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"].get("EventSourceArn") == {"Fn::GetAtt": ["OrdersQueue", "Arn"]}
    ]
    check(
        len(mappings) == 1 and mappings[0]["FunctionName"] == {"Ref": alias_id},
        "on: the orders queue's trigger invokes the alias",
    )
    others = [
        k
        for k, r in of_type(on, "AWS::Lambda::Function").items()
        if k != "OrdersFunction" and "CapacityProviderConfig" in r["Properties"]
    ]
    check(not others, "on: only orders moves")

    # The payments-api tenancy switch (PaymentsApiTenancy), both settings.
    shared = off["Resources"]["PaymentsApiFunction"]["Properties"]
    check("TenancyConfig" not in shared, "tenancy none: payments-api is not tenant-isolated")
    check(
        "PaymentsApiFunctionUrl" in of_type(off, "AWS::Lambda::Url")
        and "PaymentsApiFunctionUrl" in off.get("Outputs", {}),
        "tenancy none: payments-api has its function URL",
    )
    check(
        "PaymentsApiFunctionCreatePaymentPermission" in off["Resources"],
        "tenancy none: the HTTP API may invoke payments-api",
    )
    tenants = translated(template, {"PaymentsApiTenancy": "per-tenant"})
    function = tenants["Resources"]["PaymentsApiFunction"]["Properties"]
    check(
        function.get("TenancyConfig") == {"TenantIsolationMode": "PER_TENANT"},
        "tenancy per-tenant: payments-api has TenancyConfig PER_TENANT",
    )
    check(
        not of_type(tenants, "AWS::Lambda::Url")
        and tenants["Outputs"]["PaymentsApiFunctionUrl"].get("Condition") == "PaymentsApiShared",
        "tenancy per-tenant: no function URL (nor its output)",
    )
    invokers = [
        k
        for k, r in of_type(tenants, "AWS::Lambda::Permission").items()
        if r["Properties"].get("FunctionName") == {"Ref": "PaymentsApiFunction"}
    ]
    check(not invokers, "tenancy per-tenant: no HTTP API route or URL may invoke payments-api")
    others = [
        k
        for k, r in of_type(tenants, "AWS::Lambda::Function").items()
        if k != "PaymentsApiFunction" and "TenancyConfig" in r["Properties"]
    ]
    check(not others, "tenancy per-tenant: only payments-api is tenant-isolated")

    # Why AWS::LanguageExtensions: the SAM transform alone refuses the !If.
    alone = packaged(template)
    alone["Transform"] = "AWS::Serverless-2016-10-31"
    try:
        transform(alone, dict(PARAMETERS), NoManagedPolicies())
        refusal = ""
    except Exception as e:  # the translator's InvalidDocumentException
        refusal = str(e)
    check(
        "CapacityProviderConfig" in refusal,
        "the SAM transform alone refuses the !If on CapacityProviderConfig",
    )
    check(
        "PaymentsApiFunction" in refusal,
        "the SAM transform alone refuses the !If on payments-api's Events",
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "template.yaml")

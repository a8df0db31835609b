//! The data files generated from what AWS publishes, checked against their sources in the
//! test venv (the pinned botocore and moto that `cargo xtask test` installs):
//!
//! - `crates/core/src/instance_types/generated.rs`: SageMaker's `ClusterInstanceType` enum
//!   (botocore's `sagemaker` model).
//! - `crates/sim/src/ec2_specs/generated.rs`: EC2's `DescribeInstanceTypes` facts about those
//!   types (moto's `ec2/resources/instance_types.json`, which moto generates from EC2's
//!   answers), which the simulator serves.
//!
//! Each test regenerates the file's text and compares it with the checked-in file; with
//! `INSTANTSTART_REGENERATE=1` it writes the file instead (docs/instance-types.md).

use crate::model_check::{Models, read_maybe_gz};
use instantstart_core::instance_types::{CLUSTER_INSTANCE_TYPES, InstanceTypeInfo};
use serde_json::Value;
use std::path::{Path, PathBuf};

const REGENERATE: &str = "INSTANTSTART_REGENERATE";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

/// Compares `text` with the checked-in file, or writes it when regenerating.
fn check_generated(path: &str, text: &str, source: &str) {
    let file = repo(path);
    if std::env::var(REGENERATE).is_ok_and(|v| v == "1") {
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
        return;
    }
    let current = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        current == text,
        "{path} is not what {source} gives; regenerate it with {REGENERATE}=1 \
         cargo test -p instantstart-aws --lib generated_data (docs/instance-types.md)"
    );
}

/// The installed version of a Python package, from its `*.dist-info` directory.
fn dist_version(site_packages: &Path, package: &str) -> String {
    let prefix = format!("{package}-");
    std::fs::read_dir(site_packages)
        .unwrap_or_else(|e| panic!("{}: {e}", site_packages.display()))
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find_map(|n| n.strip_prefix(&prefix)?.strip_suffix(".dist-info").map(str::to_string))
        .unwrap_or_else(|| panic!("no {package} in {}", site_packages.display()))
}

fn site_packages() -> PathBuf {
    // botocore's models are `<site-packages>/botocore/data`.
    Models::get().dir.join("../..")
}

/// The text of `crates/core/src/instance_types/generated.rs`.
pub fn cluster_instance_types_text(version: &str, enum_values: &[String]) -> String {
    let mut out = format!(
        "//! Generated from botocore {version} (`sagemaker` 2017-07-24, shape `ClusterInstanceType`): do not\n\
         //! edit. Regenerate with `INSTANTSTART_REGENERATE=1` and the model test\n\
         //! `instance_types_are_the_pinned_botocore` (docs/instance-types.md).\n\n\
         /// The botocore release the list below was generated from.\n\
         pub const BOTOCORE_VERSION: &str = \"{version}\";\n\n\
         /// Every value of SageMaker's `ClusterInstanceType`, in the model's order.\n\
         pub const CLUSTER_INSTANCE_TYPES: &[&str] = &[\n"
    );
    for v in enum_values {
        out.push_str(&format!("    \"{v}\",\n"));
    }
    out.push_str("];\n");
    out
}

/// One EC2 `InstanceTypeInfo` (as `DescribeInstanceTypes` answers it) in our terms.
pub fn specs_of(name: &str, ec2: &Value) -> InstanceTypeInfo {
    let n = |v: &Value| v.as_u64().unwrap_or(0) as u32;
    let gpus = ec2.pointer("/GpuInfo/Gpus").and_then(Value::as_array).cloned().unwrap_or_default();
    let neuron = ec2.pointer("/NeuronInfo/NeuronDevices").and_then(Value::as_array).cloned().unwrap_or_default();
    let (accelerators, accelerator) = if let Some(g) = gpus.first() {
        (
            gpus.iter().map(|g| n(&g["Count"])).sum(),
            InstanceTypeInfo::accelerator_kind(
                g["Manufacturer"].as_str().unwrap_or("gpu"),
                g["Name"].as_str().unwrap_or(""),
            ),
        )
    } else if let Some(d) = neuron.first() {
        (
            neuron.iter().map(|d| n(&d["Count"])).sum(),
            InstanceTypeInfo::accelerator_kind("aws", d["Name"].as_str().unwrap_or("")),
        )
    } else {
        (0, "none".to_string())
    };
    let network = &ec2["NetworkInfo"];
    let efa = network["EfaSupported"].as_bool().unwrap_or(false);
    let efa_only = efa
        && network["NetworkCards"].as_array().is_some_and(|cards| {
            cards.iter().any(|c| c["InterfaceTypes"].as_array().is_some_and(|t| t.iter().any(|t| t == "efa-only")))
        });
    InstanceTypeInfo {
        name: name.to_string(),
        vcpus: n(&ec2.pointer("/VCpuInfo/DefaultVCpus").cloned().unwrap_or_default()),
        memory_gib: (ec2.pointer("/MemoryInfo/SizeInMiB").and_then(Value::as_u64).unwrap_or(0) / 1024) as u32,
        accelerators,
        accelerator,
        efa_interfaces: if efa { n(&network["EfaInfo"]["MaximumEfaInterfaces"]) } else { 0 },
        efa_only_supported: efa_only,
    }
}

/// The text of `crates/sim/src/ec2_specs/generated.rs`.
pub fn sim_specs_text(moto_version: &str, moto: &Value) -> String {
    let mut out = format!(
        "//! Generated from moto {moto_version} (`moto/ec2/resources/instance_types.json.gz`, EC2's\n\
         //! `DescribeInstanceTypes` answers as moto records them) for SageMaker's ClusterInstanceType\n\
         //! values: do not edit. Regenerate with `INSTANTSTART_REGENERATE=1` and the test\n\
         //! `sim_specs_are_the_pinned_moto_data` (docs/instance-types.md). A type EC2 does not\n\
         //! describe has no row: its specs are unknown, as on AWS.\n\n\
         /// The moto release the rows below were generated from.\n\
         pub const MOTO_VERSION: &str = \"{moto_version}\";\n\n\
         /// `(name, vCPUs, memory GiB, accelerators, accelerator, max EFA interfaces, EFA-only)`.\n\
         pub type Row = (&'static str, u32, u32, u32, &'static str, u32, bool);\n\n\
         /// One row per described type, in ClusterInstanceType's order.\n\
         pub const ROWS: &[Row] = &[\n"
    );
    for t in CLUSTER_INSTANCE_TYPES {
        let Some(ec2) = moto.get(instantstart_core::instance_types::ec2_name(t)) else { continue };
        let i = specs_of(t, ec2);
        out.push_str(&format!(
            "    (\"{}\", {}, {}, {}, \"{}\", {}, {}),\n",
            i.name, i.vcpus, i.memory_gib, i.accelerators, i.accelerator, i.efa_interfaces, i.efa_only_supported
        ));
    }
    out.push_str("];\n");
    out
}

#[test]
fn instance_types_are_the_pinned_botocore() {
    let models = Models::get();
    let version = models.botocore_version.clone().expect("botocore's version");
    let sagemaker = models.model("sagemaker").expect("sagemaker model");
    let values: Vec<String> = sagemaker.shape("ClusterInstanceType")["enum"]
        .as_array()
        .expect("ClusterInstanceType is an enum")
        .iter()
        .map(|v| v.as_str().expect("enum value").to_string())
        .collect();
    assert!(values.len() >= 150, "{} values", values.len());
    check_generated(
        "crates/core/src/instance_types/generated.rs",
        &cluster_instance_types_text(&version, &values),
        &format!("botocore {version}"),
    );
}

#[test]
fn sim_specs_are_the_pinned_moto_data() {
    let site = site_packages();
    let version = dist_version(&site, "moto");
    let text = read_maybe_gz(&site.join("moto/ec2/resources/instance_types.json")).expect("moto's instance types");
    let moto: Value = serde_json::from_str(&text).expect("moto's instance types are JSON");
    check_generated(
        "crates/sim/src/ec2_specs/generated.rs",
        &sim_specs_text(&version, &moto),
        &format!("moto {version}"),
    );
}

/// The mapping from EC2's answer, on the two cases the review found wrong in the old table.
#[test]
fn ec2_facts_map_to_our_specs() {
    let g5 = serde_json::json!({
        "VCpuInfo": {"DefaultVCpus": 48}, "MemoryInfo": {"SizeInMiB": 196608},
        "GpuInfo": {"Gpus": [{"Count": 4, "Manufacturer": "NVIDIA", "Name": "A10G"}]},
        "NetworkInfo": {"EfaSupported": true, "EfaInfo": {"MaximumEfaInterfaces": 1},
            "NetworkCards": [{"InterfaceTypes": ["interface", "efa", "efa-only"]}]}
    });
    let i = specs_of("ml.g5.12xlarge", &g5);
    assert_eq!((i.vcpus, i.memory_gib, i.accelerators, i.accelerator.as_str()), (48, 192, 4, "nvidia-a10g"));
    assert_eq!((i.efa_interfaces, i.efa_only_supported), (1, true));
    let trn = serde_json::json!({
        "VCpuInfo": {"DefaultVCpus": 192}, "MemoryInfo": {"SizeInMiB": 2097152},
        "NeuronInfo": {"NeuronDevices": [{"Count": 16, "Name": "Trainium2"}]},
        "NetworkInfo": {"EfaSupported": false, "NetworkCards": [{"InterfaceTypes": ["interface", "efa-only"]}]}
    });
    let i = specs_of("ml.trn2.48xlarge", &trn);
    assert_eq!(
        (i.accelerators, i.accelerator.as_str(), i.efa_interfaces, i.efa_only_supported),
        (16, "aws-trainium2", 0, false)
    );
}

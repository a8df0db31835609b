//! Conversions between our [`Tags`] and each service's tag shapes.

use crate::error::invalid;
use instantstart_core::provider::{ProviderError, Tags};

/// The `Name` tag key EC2 shows in the console.
pub const NAME: &str = "Name";

/// `tags` plus `Name=name`.
pub fn with_name(tags: &Tags, name: &str) -> Tags {
    let mut t = tags.clone();
    t.insert(NAME.to_string(), name.to_string());
    t
}

pub fn ec2(tags: &Tags) -> Vec<aws_sdk_ec2::types::Tag> {
    tags.iter().map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build()).collect()
}

pub fn ec2_spec(kind: aws_sdk_ec2::types::ResourceType, tags: &Tags) -> aws_sdk_ec2::types::TagSpecification {
    aws_sdk_ec2::types::TagSpecification::builder().resource_type(kind).set_tags(Some(ec2(tags))).build()
}

pub fn from_ec2(tags: &[aws_sdk_ec2::types::Tag]) -> Tags {
    tags.iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

pub fn iam(api: &str, tags: &Tags) -> Result<Vec<aws_sdk_iam::types::Tag>, ProviderError> {
    tags.iter()
        .map(|(k, v)| {
            aws_sdk_iam::types::Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| invalid(api, format!("tag {k}: {e}")))
        })
        .collect()
}

pub fn from_iam(tags: &[aws_sdk_iam::types::Tag]) -> Tags {
    tags.iter().map(|t| (t.key().to_string(), t.value().to_string())).collect()
}

pub fn sagemaker(tags: &Tags) -> Vec<aws_sdk_sagemaker::types::Tag> {
    tags.iter().map(|(k, v)| aws_sdk_sagemaker::types::Tag::builder().key(k).value(v).build()).collect()
}

pub fn from_sagemaker(tags: &[aws_sdk_sagemaker::types::Tag]) -> Tags {
    tags.iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

pub fn s3(api: &str, tags: &Tags) -> Result<aws_sdk_s3::types::Tagging, ProviderError> {
    let set = tags
        .iter()
        .map(|(k, v)| {
            aws_sdk_s3::types::Tag::builder().key(k).value(v).build().map_err(|e| invalid(api, format!("tag {k}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    aws_sdk_s3::types::Tagging::builder().set_tag_set(Some(set)).build().map_err(|e| invalid(api, e.to_string()))
}

pub fn from_s3(tags: &[aws_sdk_s3::types::Tag]) -> Tags {
    tags.iter().map(|t| (t.key().to_string(), t.value().to_string())).collect()
}

pub fn eks(tags: &Tags) -> std::collections::HashMap<String, String> {
    tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

pub fn from_eks(tags: Option<&std::collections::HashMap<String, String>>) -> Tags {
    tags.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default()
}

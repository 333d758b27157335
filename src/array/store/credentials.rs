//! [`MissingCredentials`]: an S3 store that found no AWS credentials says
//! so, and how to give them, rather than object_store's error of the last
//! place it looked (the EC2 instance metadata service, which off EC2 is a
//! refused connection or a `403` from whatever answers at its address).

use std::sync::Arc;

use zarrs::storage::StorageError;

/// No AWS credentials were found for an S3 store: none in its storage
/// options or the `AWS_*` environment variables (keys, web identity,
/// container credentials), and the EC2 instance metadata service, the last
/// place object_store looks, gave none. [`ReadError::Store`](crate::reader::ReadError::Store)
/// keeps it as its source.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "no AWS credentials found: none in the storage options or the AWS_* environment variables, and the EC2 \
     instance metadata service gave none ({source}); give access_key_id and secret_access_key as storage \
     options (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment), or skip_signature=true \
     (Python: anon=True) to read a public bucket unsigned"
)]
pub struct MissingCredentials {
    /// object_store's error of the instance metadata service.
    source: Arc<object_store::Error>,
}

/// The [`MissingCredentials`] that `e` (an error of [`ObjectStorage`](crate::reader::ObjectStorage))
/// was caused by, if any.
pub(crate) fn missing_credentials(e: &StorageError) -> Option<&MissingCredentials> {
    crate::array::store::object_storage::cause(e)
}

#[cfg(feature = "s3")]
pub(crate) use instance::explain_missing;

#[cfg(feature = "s3")]
mod instance {
    use std::sync::Arc;

    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsCredential, AwsCredentialProvider};
    use object_store::CredentialProvider;

    use crate::array::store::credentials::MissingCredentials;
    use crate::array::store::truthy;

    /// object_store's instance metadata credentials, its error as [`MissingCredentials`].
    #[derive(Debug)]
    struct Explained(AwsCredentialProvider);

    #[async_trait::async_trait]
    impl CredentialProvider for Explained {
        type Credential = AwsCredential;

        async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
            self.0.get_credential().await.map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(MissingCredentials { source: Arc::new(e) }),
            })
        }
    }

    /// Whether `builder` is set to sign without credentials of its own, so
    /// that object_store asks the instance metadata service (its builder's
    /// order: keys, web identity, container, then the instance).
    fn asks_instance_metadata(builder: &AmazonS3Builder) -> bool {
        let set = |key| builder.get_config_value(&key).is_some();
        let signs_otherwise = truthy(builder.get_config_value(&AmazonS3ConfigKey::SkipSignature).as_deref())
            || set(AmazonS3ConfigKey::AccessKeyId)
            || set(AmazonS3ConfigKey::SecretAccessKey)
            || (set(AmazonS3ConfigKey::WebIdentityTokenFile) && set(AmazonS3ConfigKey::RoleArn))
            || set(AmazonS3ConfigKey::ContainerCredentialsRelativeUri)
            || (set(AmazonS3ConfigKey::ContainerCredentialsFullUri)
                && set(AmazonS3ConfigKey::ContainerAuthorizationTokenFile));
        !signs_otherwise
    }

    /// `builder`, its instance metadata credentials (where it would use
    /// them) failing with [`MissingCredentials`].
    pub(crate) fn explain_missing(builder: AmazonS3Builder) -> AmazonS3Builder {
        if !asks_instance_metadata(&builder) {
            return builder;
        }
        // object_store's instance provider is private: a store built alike
        // has it. Where that build fails, the caller's build says why.
        match builder.clone().build() {
            Ok(alike) => builder.with_credentials(Arc::new(Explained(alike.credentials().clone()))),
            Err(_) => builder,
        }
    }
}

//! The `payments` Lambda function (SQS FIFO trigger).

/// With the `mimalloc` feature: mimalloc as the allocator (less CPU per
/// message, more RSS; `bench payments`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::serve(payments::App::from_env, payments::App::handle)
}

//! The boxed future handlers, approvers and nested calls return: one alias, in a module of its
//! own so that every module can use it without depending on the tool declarations.

use std::future::Future;
use std::pin::Pin;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

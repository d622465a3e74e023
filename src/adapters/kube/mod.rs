//! Kubernetes: client (kubeconfig or EKS token), headroom actuators, NodePool limits and budgets, pending pods. (Kube owner.)

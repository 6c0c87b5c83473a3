"""``torchvision.models`` under ``ember run``: the builders and weight enums libraries
import by name (torchmetrics' image metrics, Lightning's helpers); calling a builder
raises NotImplementedError, and a weight enum has no members. Build models with the
library that defines them (timm) instead."""
from ember._torchvision import absent
from ember.compat import missing_torchvision

_BUILDERS = ("alexnet", "vgg11", "vgg13", "vgg16", "vgg19", "vgg16_bn", "resnet18",
             "resnet34", "resnet50", "resnet101", "resnet152", "squeezenet1_0",
             "squeezenet1_1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
             "efficientnet_b0", "inception_v3", "densenet121")
_WEIGHTS = ("AlexNet_Weights", "VGG16_Weights", "VGG19_Weights", "ResNet18_Weights",
            "ResNet50_Weights", "SqueezeNet1_1_Weights", "MobileNet_V2_Weights",
            "Inception_V3_Weights")

__all__ = [*_BUILDERS, *_WEIGHTS]
globals().update({name: absent("torchvision.models", name) for name in _BUILDERS})
globals().update({name: type(name, (), {"__module__": __name__, "__doc__": (
    f"Not in ember: torchvision's {name} enum, without members.")}) for name in _WEIGHTS})


def __getattr__(name):
    raise missing_torchvision("torchvision.models", name)

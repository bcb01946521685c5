// The widget tests' main: a QApplication on the offscreen platform, settings in a fresh temporary folder, and a
// fixed locale for numbers checked as text.
#include <gtest/gtest.h>

#include <QApplication>
#include <QLocale>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QStandardPaths::setTestModeEnabled(true);
  // Settings go to a fresh folder so that neither the user's settings nor an earlier run leak in.
  QTemporaryDir settingsDir;
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, settingsDir.path());
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir.path());
  // Runs are recorded in a scratch experiment database, never the user's (tests that run a window set their own).
  QTemporaryDir dbDir;
  qputenv("PARETO_DB", dbDir.filePath("pareto.db").toUtf8());
  QApplication app(argc, argv);
  QCoreApplication::setOrganizationName("Pareto");
  QCoreApplication::setApplicationName("test_widgets");
  QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
